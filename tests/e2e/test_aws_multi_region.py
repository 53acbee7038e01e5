"""A launch across regions (--regions) and offers ranked by expected cost (issue 32, items 3
and 4), in the lab's two regions (spotlab/regions.py): offers come from each region with its
own subnets, image and prices; a region that lacks the type is left out with a line; a pool
that keeps reclaiming (the ledger's history, EC2's placement score) ranks behind a slightly
dearer quiet one, and --dry-run says why."""

from __future__ import annotations

import json
import time

import pytest

from spotlab import Lab
from spotlab.lab import OTHER_REGION, OTHER_ZONES, REGION
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.store.ledger import InstanceRecord, Ledger
from tests.conftest import Env

pytestmark = pytest.mark.slow

BOTH = f"{REGION},{OTHER_REGION}"


def test_regions_plan_offers_from_both_and_launch_in_the_cheaper(aws_env: Env, lab: Lab) -> None:
    # the other region's first zone is the cheapest c6i.large anywhere (constant for a day)
    lab.prices.set_spot("c6i.large", OTHER_ZONES[0], [(time.time() - 86400, 0.0200)])
    launched = aws_env.cli(
        "launch", "digits-fast", "--cloud", "aws", "--regions", BOTH,
        "--instance-type", "c6i.large", "--set", "epochs=1", timeout=600,
    )  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    (run,) = aws_env.runs()
    assert run["state"] == "succeeded", run
    (item,) = lab.instances(run["id"])
    assert lab.region_of(item["InstanceId"]) == OTHER_REGION
    assert item["Placement"]["AvailabilityZone"] == OTHER_ZONES[0]
    assert item["ImageId"] == lab.image_ids[OTHER_REGION]
    assert item["State"]["Name"] == "terminated"  # ended there by spotrun
    with Ledger(load_settings(aws_env.home)) as ledger:
        plan = ledger.get_run(run["id"]).plan
    assert plan is not None
    assert {o.region for o in plan.offers} == {REGION, OTHER_REGION}  # the fallbacks: both
    assert plan.offers[0].zone == OTHER_ZONES[0]


def test_a_region_that_lacks_the_type_is_left_out_with_a_line(aws_env: Env, lab: Lab) -> None:
    lab.front.type_availability.remove(OTHER_REGION, "c6i.large")
    proc = aws_env.cli(
        "launch", "digits-fast", "--cloud", "aws", "--regions", BOTH,
        "--instance-type", "c6i.large", "--dry-run",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert f"left out {OTHER_REGION}: unknown instance type 'c6i.large' in {OTHER_REGION}" in said
    assert "cheapest of 3 fitting offer(s): c6i.large in us-east-1c" in said, said
    # that region alone: one line, non-zero, nothing launched
    proc = aws_env.cli(
        "launch", "digits-fast", "--cloud", "aws", "--regions", OTHER_REGION,
        "--instance-type", "c6i.large",
    )  # fmt: skip
    assert proc.returncode != 0
    assert f"unknown instance type 'c6i.large' in {OTHER_REGION}" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    # a region outside aws.regions is refused the same way
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws", "--regions", "eu-west-1")
    assert proc.returncode != 0 and "not in aws.regions" in proc.stderr, proc.stderr
    assert lab.instances() == [] and lab.front.run_requests == []


def test_a_pool_that_interrupts_often_ranks_behind_a_quiet_dearer_one(
    aws_env: Env, lab: Lab
) -> None:
    """c6i.large in us-east-1c is the cheapest ($0.0298/h), but the ledger saw it reclaim 3
    instances in 10 hours and EC2 scores it 2: us-east-1a ($0.0312/h, score 9) is chosen."""
    lab.front.placement_scores.set("c6i.large", "us-east-1a", 9)
    lab.front.placement_scores.set("c6i.large", "us-east-1c", 2)
    now = time.time()
    with Ledger(load_settings(aws_env.home)) as ledger:
        earlier = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="aws"))
        for n in range(3):
            start = now - 86400 + n * 4 * 3600
            ledger.upsert_instance(
                InstanceRecord(
                    id=f"i-0000000000000000{n}", run_id=earlier.id, provider="aws",
                    instance_type="c6i.large", market="spot", state="terminated",
                    region=REGION, zone="us-east-1c", launched_at=start,
                    terminated_at=start + 10 / 3 * 3600,
                    end_reason="Server.SpotInstanceTermination: Spot instance termination",
                )
            )  # fmt: skip
    proc = aws_env.cli(
        "launch", "digits-fast", "--cloud", "aws", "--instance-type", "c6i.large", "--dry-run"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert "first of 3 fitting offer(s): c6i.large in us-east-1a" in said, said
    assert (
        "chose c6i.large in us-east-1a: $0.0312/h, expected $0.0313/h with interruptions "
        "(score 9, no reclaims recorded here)" in said
    ), said
    assert "passed over c6i.large in us-east-1c ($0.0298/h): expected $0.03" in said, said
    assert "it interrupts often (score 2, 3 reclaim(s) in 10 h)" in said, said
    assert any(c.get("InstanceType.1") == "c6i.large" for c in lab.front.placement_scores.calls)
    assert lab.front.run_requests == []  # a dry run launches nothing


def test_without_placement_permission_the_plan_goes_by_price(aws_env: Env, lab: Lab) -> None:
    """The lab refuses GetSpotPlacementScores until a test sets a score (UnauthorizedOperation,
    as for a user without ec2:GetSpotPlacementScores): the plan is made all the same."""
    proc = aws_env.cli(
        "launch", "digits-fast", "--cloud", "aws", "--instance-type", "c6i.large", "--dry-run"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert "cheapest of 3 fitting offer(s): c6i.large in us-east-1c" in said, said
    assert "(no placement score, no reclaims recorded here)" in said, said
    assert lab.front.placement_scores.calls  # asked, refused
    json.dumps(said)  # plain text
