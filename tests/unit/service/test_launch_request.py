"""LaunchRequest: what a launch was asked for, validated once, merged once, stored as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotrun.core.config import Resources, load_settings
from spotrun.core.errors import UsageError
from spotrun.core.launch_request import LaunchRequest, ResourceFlags
from spotrun.service.prepare import prepare_launch
from spotrun.service.resume import resume
from spotrun.service.sweeps import prepare_sweep
from spotrun.store.ledger import Ledger
from spotrun.store.sweep_spec import SweepSpec


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"gpus": -2}, "--gpus must be 0 or more, got -2"),
        ({"nodes": 0}, "--nodes must be a whole number of at least 1, got 0"),
        ({"max_cost_usd": 0.0}, "--max-cost must be above 0, got 0.0"),
        ({"max_hours": -1.0}, "--max-hours must be above 0, got -1"),
        ({"max_hours": float("inf")}, "max_hours"),
        ({"cloud": "gcp"}, "cloud"),
        ({"spot_policy": "cheap"}, "spot_policy"),
        ({"disk_gb": 4}, "disk_gb"),
        ({"gpu": 1}, "did you mean gpus?"),
    ],
)
def test_bad_fields_are_one_line_usage_errors(fields: dict[str, object], said: str) -> None:
    with pytest.raises(UsageError) as refused:
        LaunchRequest(**fields)
    message = refused.value.user_message()
    assert said in message and "\n" not in refused.value.message, message


def test_the_one_merge_flags_over_the_task_file_over_the_recipe() -> None:
    recipe = Resources(gpus=1, gpu_model="A10G", disk_gb=100)
    task = LaunchRequest(name="from-task", gpus=2, spot=True, max_hours=3.0, region="us-west-2")
    flags = LaunchRequest(gpus=4, max_cost_usd=2.0, spot_policy="on-demand", zone="us-west-2b")
    asked = flags.over(task)
    assert (asked.name, asked.gpus, asked.max_hours, asked.max_cost_usd) == ("from-task", 4, 3, 2)
    merged = asked.resources_over(recipe)
    # the flags win, then the task file, then the recipe; on-demand means no spot at all
    assert merged == Resources(
        gpus=4, gpu_model="A10G", disk_gb=100, region="us-west-2", zone="us-west-2b", spot=False
    )
    # what is not asked keeps the recipe's (and nothing asked: the recipe's own)
    assert LaunchRequest().resources_over(recipe) == recipe
    # a merge that breaks Resources' own bounds is a one-line error too
    with pytest.raises(UsageError, match="disk_gb"):
        LaunchRequest(disk_gb=10**9).resources_over(recipe)


def test_a_request_round_trips_through_json() -> None:
    asked = LaunchRequest(
        cloud="aws",
        name="r1",
        gpus=1,
        regions=["us-east-1", "us-west-2"],
        nodes=2,
        disk_gb=200,
        max_cost_usd=5.0,
        max_hours=1.5,
        wait_for_capacity_s=600.0,
        spot_policy="auto",
    )
    assert LaunchRequest.model_validate_json(asked.model_dump_json()) == asked


def test_a_sweep_spec_stored_by_the_old_code_loads_and_is_stored_the_same() -> None:
    # a sweeps.spec row as the code before LaunchRequest wrote it (resources: an untyped dict)
    old = (
        '{"recipe": "digits-fast", "overrides": [], "grid": {"lr": ["0.1", "0.2"]}, '
        '"space": {}, "random": null, "seed": 0, "search": null, "trials": null, '
        '"max_parallel": 2, "gpus_per_trial": 0, '
        '"resources": {"instance_type": "c6i.large", "nodes": 2, "spot": false}, '
        '"cloud": "aws", "max_cost_usd": 3.0, "early_stop": "asha", "grace_epochs": 1, '
        '"reduction_factor": 3, "pbt_interval": null, "pbt_perturb": 1.2, '
        '"pbt_quantile": 0.25, "metric": "test_acc", "mode": "max", "name": "old", '
        '"env": {}, "wait_for_capacity_s": null, "spot_policy": "on-demand"}'
    )
    spec = SweepSpec.model_validate_json(old)
    assert spec.resources == ResourceFlags(instance_type="c6i.large", nodes=2, spot=False)
    assert spec.resources.resources_over(Resources()).nodes == 2
    assert json.loads(spec.model_dump_json()) == json.loads(old)  # the same row again


def test_the_request_travels_to_the_stored_spec(tmp_path: Path) -> None:
    """A library launch's capacity terms reach the spec (before, only the CLI's did)."""
    settings = load_settings(tmp_path)
    asked = LaunchRequest(name="lib", max_hours=2.0, spot_policy="auto", wait_for_capacity_s=60)
    spec = prepare_launch(settings, "digits-fast", asked, overrides=["epochs=1"]).spec
    assert (spec.name, spec.cloud, spec.max_hours) == ("lib", "local", 2.0)
    assert (spec.spot_policy, spec.wait_for_capacity_s) == ("auto", 60)


def test_a_sweep_keeps_the_requests_resources_and_refuses_what_it_cannot_honour(
    tmp_path: Path,
) -> None:
    settings = load_settings(tmp_path)
    asked = LaunchRequest(spot_policy="on-demand", name="sw", max_cost_usd=1.0)
    prepared = prepare_sweep(settings, "digits-fast", asked, grid=["lr=0.1,0.2"])
    assert prepared.spec.resources == ResourceFlags(spot=False)
    assert (prepared.spec.name, prepared.spec.max_cost_usd) == ("sw", 1.0)
    with pytest.raises(UsageError, match="a sweep takes no max_hours"):
        prepare_sweep(settings, "digits-fast", LaunchRequest(max_hours=1.0), grid=["lr=0.1"])


def test_resume_checks_its_new_caps_as_a_launch_does(tmp_path: Path) -> None:
    refused = pytest.raises(UsageError, match="--max-cost must be above 0, got -1")
    with Ledger(load_settings(tmp_path)) as ledger, refused:
        resume(ledger, "nosuchrun", max_cost_usd=-1.0)
