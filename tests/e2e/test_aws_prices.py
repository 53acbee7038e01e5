"""The AWS provider as a PriceSource (what spotrun/cost/rules.py integrates) and instance lifetimes
as EC2 reports them."""

from __future__ import annotations

import shutil
import time

from spotlab import Lab
from spotrun.cloud.aws import AwsProvider
from spotrun.cloud.base import InstanceRequest
from spotrun.core.config import Resources, load_settings
from spotrun.cost.prices import PriceSource
from tests.conftest import Env


def test_spot_price_history_is_the_window_with_the_price_in_force(aws_env: Env, lab: Lab) -> None:
    t0 = 1_700_000_000.0
    points = [(t0 + 60.0 * i, round(0.40 + 0.0001 * (i % 50), 4)) for i in range(1500)]
    lab.prices.set_spot("g5.xlarge", "us-east-1a", points)
    lab.prices.set_spot("g5.xlarge", "us-east-1b", [(t0, 9.99)])  # another zone: not asked
    provider = AwsProvider(load_settings(aws_env.home))
    assert isinstance(provider, PriceSource)

    start, end = t0 + 60 * 100 + 30, t0 + 60 * 1400
    history = provider.spot_price_history("us-east-1", "us-east-1a", "g5.xlarge", start, end)
    expected = [
        p for p in points if start - 60 < p[0] <= end
    ]  # the one in force at start, then all
    assert history == expected and history[0][0] < start
    pages = [c for c in lab.front.spot_prices.calls if c.get("AvailabilityZone") == "us-east-1a"]
    assert len(pages) == 2 and pages[1]["NextToken"]  # 1,301 points: EC2 pages by 1,000

    assert (
        provider.spot_price_history("us-east-1", "us-east-1a", "g5.xlarge", t0 - 100, t0 - 50) == []
    )


def test_on_demand_price_from_the_pricing_api_else_the_shipped_table(
    aws_env: Env, lab: Lab
) -> None:
    lab.prices.set_on_demand("g5.xlarge", 1.1)
    asked = AwsProvider(load_settings(aws_env.home))
    assert asked.on_demand_price("us-east-1", "g5.xlarge") == 1.1
    assert asked.on_demand_source == "the AWS Pricing API"
    assert asked.on_demand_price("us-east-1", "g6.xlarge") == 0.8048  # the API has none: table

    lab.front.on_demand.prices.clear()  # now the API refuses, as without pricing:GetProducts
    shutil.rmtree(aws_env.home / "cache", ignore_errors=True)  # forget what was cached
    refused = AwsProvider(load_settings(aws_env.home))
    assert refused.on_demand_price("us-east-1", "p3.2xlarge") == 3.06
    assert refused.on_demand_source.startswith("spotrun's shipped on-demand table of")
    assert refused.on_demand_price("eu-west-3", "p3.2xlarge") is None  # the table has one region


def test_lifetimes_come_from_ec2(aws_env: Env, lab: Lab) -> None:
    provider = AwsProvider(load_settings(aws_env.home))
    (offer,) = provider.offers(Resources(instance_type="c6i.large", zone="us-east-1b"))
    before = time.time()
    (kept,) = provider.launch(InstanceRequest("life00000001", offer))
    after = time.time()
    (taken,) = provider.launch(InstanceRequest("life00000002", offer))
    # EC2's LaunchTime, in whole seconds: within the call, whatever the call took
    assert kept.launched_at is not None and int(before) <= kept.launched_at <= after
    assert kept.ended_at is None and kept.state_reason is None

    (ended,) = provider.terminate("life00000001")
    assert ended.state == "terminated" and ended.ended_at is not None
    assert ended.launched_at is not None and ended.launched_at <= ended.ended_at <= time.time() + 1
    assert "User initiated" in (ended.state_reason or "")

    lab.interruptions.reclaim(taken.id)  # EC2 takes the spot instance back
    (gone,) = provider.describe("life00000002")
    assert gone.state == "terminated" and gone.ended_at is not None
    assert "Spot instance termination" in (gone.state_reason or "")
    provider.terminate("life00000002")
