"""Limits that are limits: caps must be finite, counts that drive work have a bound
(issue 18, class 7). Through the CLI (nothing launched) and, for many values, hypothesis."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spotrun.core.config import LaunchSpec, Resources
from spotrun.core.errors import UsageError
from spotrun.recipes import get_recipe
from spotrun.recipes.overrides import COUNT_LIMITS, MAX_COUNT, apply_overrides
from tests.conftest import Env
from tests.e2e.test_bad_input import assert_one_line_error


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--set", "epochs=1e23"], "--set epochs: expected an integer, got '1e23'"),
        (["--set", "epochs=100000000"], "more than 100,000"),
        (["--set", "batch_size=99999999999"], "more than 1,000,000,000"),
        (["--set", "lr=inf"], "expected a finite number"),
        (["--max-cost", "1e400"], "max_cost_usd"),
        (["--max-hours", "inf"], "max_hours"),
        (["--max-hours", "nan"], "max_hours"),
    ],
)
def test_no_cap_and_no_endless_count_is_accepted(env: Env, args: list[str], fragment: str) -> None:
    proc = env.cli("launch", "digits-fast", "-d", *args)
    assert_one_line_error(proc, 2, fragment)
    assert env.runs() == []


@settings(max_examples=200, deadline=None)
@given(value=st.one_of(st.integers(), st.floats(), st.text(max_size=12)))
def test_an_epoch_count_is_a_bounded_integer(value: object) -> None:
    recipe = get_recipe("digits-fast")
    text = str(value)
    try:
        got = apply_overrides(recipe, [f"epochs={text}"])
    except UsageError:
        return
    assert isinstance(got.epochs, int) and 1 <= got.epochs <= COUNT_LIMITS["epochs"]
    assert got.epochs == int(text.strip())


@settings(max_examples=200, deadline=None)
@given(cap=st.floats(), hours=st.floats())
def test_a_launch_cap_is_finite(cap: float, hours: float) -> None:
    try:
        spec = LaunchSpec(recipe="x", max_cost_usd=cap, max_hours=hours)
    except ValueError:
        return
    assert math.isfinite(spec.max_cost_usd or 0) and math.isfinite(spec.max_hours or 0)


def test_resource_counts_are_bounded() -> None:
    for bad in ({"gpus": 80_000}, {"nodes": 10**6}, {"disk_gb": 10**7}):
        with pytest.raises(ValueError):
            Resources.model_validate(bad)
    assert MAX_COUNT == 1_000_000_000
