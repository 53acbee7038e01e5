"""Fault injection in the lab (scenarios in tests/spotlab.py; the bench prints them all).

Each scenario asserts what the issue asks: the run completes; its final metrics equal an
uninterrupted run's bit for bit (digits-fast on the CPU is deterministic); the work lost is
zero with a notice and at most one checkpoint interval without (two when the newest checkpoint
is damaged); no spotrun-tagged instance is left running; every instance is in the ledger and
in the run's cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import spotlab
from tests.conftest import Env
from tests.lab import Lab
from tests.lab.fixtures import use_lab

pytestmark = pytest.mark.slow

EPOCH = spotlab.steps_per_epoch()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return spotlab.reference_metrics(Path(tmp_path_factory.mktemp("reference")))


@pytest.fixture
def spot_env(env: Env, lab: Lab) -> Iterator[Env]:
    with use_lab(env, lab, **spotlab.FAST):
        yield env


def _run(name: str, env: Env, lab: Lab, reference: dict[str, Any]) -> spotlab.Outcome:
    scenario = spotlab.Scenario(name, env, lab)
    spotlab.SCENARIOS[name](scenario)
    out = scenario.finish(reference)
    assert out.ok, str(out)
    return out


def test_two_notices_then_capacity_error_and_throttling(
    spot_env: Env, lab: Lab, reference: dict[str, Any]
) -> None:
    """Notices at two points of training; the second replacement first meets no capacity for
    the same offer (then takes the next one) and EC2 throttling on the way."""
    out = _run("2 notices; capacity error + throttling on 2nd", spot_env, lab, reference)
    assert out.instances == 3, str(out)
    assert out.lost_steps == [0, 0], str(out)  # the notice's checkpoint is where it goes on
    assert len(out.to_request_s) == 2 and max(out.to_request_s) <= 10.0, str(out)
    assert any("InsufficientInstanceCapacity" in e for e in out.events), str(out)


def test_newest_checkpoint_damaged_after_a_reclaim(
    spot_env: Env, lab: Lab, reference: dict[str, Any]
) -> None:
    out = _run("newest checkpoint damaged", spot_env, lab, reference)
    assert out.instances == 2, str(out)
    (lost,) = out.lost_steps
    assert 0 < lost <= 2 * EPOCH, str(out)  # resumed from the checkpoint before the torn one
    assert any("incomplete" in e or "restored" in e for e in out.events), out.events


def test_supervisor_killed_at_ten_random_points(
    spot_env: Env, lab: Lab, reference: dict[str, Any]
) -> None:
    out = _run("supervisor SIGKILLed at 10 random points", spot_env, lab, reference)
    assert any("supervisor was not running" in e for e in out.events), out.events
    assert out.instances in (1, 2) and all(lost == 0 for lost in out.lost_steps), str(out)
