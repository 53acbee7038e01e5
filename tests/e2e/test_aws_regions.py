"""Two regions in the lab (spotlab/regions.py): EC2 is regional, so a run launched with
--region lands in that region's subnets, with its image, at its prices, and everything done
for it afterwards (describe, sync, terminate, cost) goes to that region; `prices` shows each
region's market and `gc` looks in every region of aws.regions."""

from __future__ import annotations

import json

import pytest

from spotlab import Lab
from spotlab.lab import OTHER_REGION, OTHER_SPOT_PRICES, OTHER_ZONES
from spotrun.cloud.aws import AwsProvider
from spotrun.cloud.base import InstanceRequest
from spotrun.core.config import Resources, load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env

pytestmark = pytest.mark.slow


def test_a_run_in_the_other_region_lives_and_ends_there(aws_env: Env, lab: Lab) -> None:
    env = aws_env
    listed = json.loads(
        env.cli(
            "prices", "--gpus", "0", "--instance-type", "c6i.large", "--region", OTHER_REGION,
            "--json", check=True,
        ).stdout
    )  # fmt: skip
    assert {o["zone"] for o in listed} == set(OTHER_ZONES), listed
    assert min(o["spot_usd_per_hour"] for o in listed) == min(OTHER_SPOT_PRICES["c6i.large"])

    launched = env.cli(
        "launch", "digits-fast", "--cloud", "aws", "--region", OTHER_REGION,
        "--instance-type", "c6i.large", "--set", "epochs=1", timeout=600,
    )  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    (run,) = env.runs()
    assert run["state"] == "succeeded", run
    (item,) = lab.instances(run["id"])
    assert lab.region_of(item["InstanceId"]) == OTHER_REGION
    assert item["Placement"]["AvailabilityZone"] in OTHER_ZONES
    assert item["ImageId"] == lab.image_ids[OTHER_REGION]
    assert item["State"]["Name"] == "terminated"  # ended there by spotrun
    # its role stored the checkpoints in the home region's bucket (S3 buckets are global)
    stored = lab.s3.list_objects_v2(Bucket=lab.bucket, Prefix=f"runs/{run['id']}/checkpoints/")
    assert stored.get("KeyCount", 0) >= 1, stored
    # asked in that region's own subnet
    (asked,) = lab.front.run_requests
    assert asked["SubnetId"] in lab.networks[OTHER_REGION].subnets.values(), asked
    with Ledger(load_settings(env.home)) as ledger:
        (record,) = ledger.instances(run["id"])
        assert (record.region, record.zone) == (OTHER_REGION, item["Placement"]["AvailabilityZone"])
        (compute,) = [line for line in ledger.cost_lines(run["id"]) if line.kind == "compute"]
    # billed at that zone's price (constant since before the launch)
    zone_price = OTHER_SPOT_PRICES["c6i.large"][OTHER_ZONES.index(record.zone)]
    assert compute.amount == pytest.approx(zone_price * max(compute.quantity, 60) / 3600)


def test_gc_looks_in_every_region(aws_env: Env, lab: Lab) -> None:
    settings = load_settings(aws_env.home)
    assert OTHER_REGION in settings.aws.regions
    provider = AwsProvider(settings)
    (offer,) = provider.offers(
        Resources(instance_type="c6i.large", region=OTHER_REGION, zone=OTHER_ZONES[0])
    )
    (orphan,) = provider.launch(InstanceRequest("0rphanwest01", offer))
    listed = aws_env.cli("gc", check=True).stdout
    assert orphan.id in listed and OTHER_REGION in listed, listed
    aws_env.cli("gc", "--yes", check=True)
    (item,) = lab.instances("0rphanwest01")
    assert item["State"]["Name"] in ("shutting-down", "terminated")
