"""The data set's region in the ranking (issue 32, item 3): an offer elsewhere pays the data
set's one-time transfer, spread over the run's expected hours; the plan's words say so."""

from __future__ import annotations

import pytest

from spotlab.iam import Identity, Resource, allowed
from spotrun.cloud import ranking
from spotrun.cloud.aws import policy
from spotrun.cloud.plan import data_transfer, make_plan
from spotrun.cloud.ranking import DataSite, RunHours
from spotrun.core.config import Resources
from tests.unit.cloud.test_ranking import offer

SITE = DataSite("s3://sets/imagenet", "us-east-1", 50 * 10**9)  # 50 GB: $1.00 to move


def test_expected_hours_takes_the_stated_time_then_max_hours_then_one_hour() -> None:
    assert ranking.expected_hours(3.0, 8.0) == RunHours(3.0, "the recipe's stated time")
    assert ranking.expected_hours(None, 8.0) == RunHours(8.0, "--max-hours")
    assert ranking.expected_hours(None, None) == RunHours(1.0, "no time stated, 1 h assumed")
    assert ranking.expected_hours(0.0, None).hours == 1.0  # no time is no statement


def test_a_one_time_charge_is_spread_over_the_hours() -> None:
    assert ranking.spread_over(1.0, 4.0) == pytest.approx(0.25)
    assert ranking.spread_over(1.0, 0.0) == pytest.approx(60.0)  # a minute at least


def test_the_transfer_is_the_size_at_the_cross_region_price() -> None:
    moved = data_transfer(SITE, RunHours(4.0, "--max-hours"))
    assert moved.usd == pytest.approx(1.00)  # 50 GB at $0.02/GB
    assert moved.usd_per_hour == pytest.approx(0.25)
    unknown = data_transfer(DataSite("s3://sets/tree", "us-east-1", None))
    assert unknown.usd is None and unknown.usd_per_hour == 0.0
    assert unknown.hours.basis == "no time stated, 1 h assumed"


def test_the_data_sets_region_wins_over_a_slightly_cheaper_one() -> None:
    east, west = offer("us-east-1a", 1.00), offer("us-west-2a", 0.90)
    moved = data_transfer(SITE, RunHours(4.0, "--max-hours"))  # west pays $0.25/h more
    assert ranking.rank([east, west])[0].offer is west  # without the data set: by price
    ranked = ranking.rank([east, west], data=moved)
    assert [r.offer for r in ranked] == [east, west]
    assert ranked[1].transfer_usd_per_hour == pytest.approx(0.25)
    assert ranked[0].transfer_usd_per_hour == 0.0
    # over a longer run the same transfer weighs less, and the cheaper region wins
    long_run = data_transfer(SITE, RunHours(20.0, "--max-hours"))  # $0.05/h
    assert ranking.rank([east, west], data=long_run)[0].offer is west


def test_the_plan_says_the_data_set_is_why_and_what_the_transfer_costs() -> None:
    east, west = offer("us-east-1a", 1.00), offer("us-west-2a", 0.90)
    moved = data_transfer(SITE, RunHours(4.0, "--max-hours"))
    reason = make_plan(Resources(gpus=1), [east, west], data=moved).reason
    assert "in us-east-1 where its data set s3://sets/imagenet lives" in reason, reason
    assert (
        "passed over g5.xlarge in us-west-2a ($0.9000/h): expected $1.1575/h with $0.2500/h "
        "for moving s3://sets/imagenet from us-east-1 ($1.00 once, over 4 h: --max-hours)"
    ) in reason, reason
    # much cheaper elsewhere: it wins all the same, and its line carries the transfer
    far_cheaper = offer("us-west-2a", 0.50)
    plan = make_plan(Resources(gpus=1), [east, far_cheaper], data=moved)
    assert plan.chosen is far_cheaper
    assert "and $0.2500/h for moving s3://sets/imagenet from us-east-1 ($1.00 once" in (
        plan.reason
    ), plan.reason


def test_an_unknown_size_ranks_by_price_and_says_so() -> None:
    east, west = offer("us-east-1a", 1.00), offer("us-west-2a", 0.90)
    moved = data_transfer(DataSite("s3://sets/tree", "us-east-1", None))
    plan = make_plan(Resources(gpus=1), [east, west], data=moved)
    assert plan.chosen is west
    assert "the data set s3://sets/tree lives in us-east-1; its size is unknown" in plan.reason
    # at equal cost the data set's region comes first
    same = offer("us-west-2a", 1.00)
    assert ranking.rank([same, east], data=moved)[0].offer is east


def test_the_user_may_head_a_data_bucket_of_its_own() -> None:
    """HeadBucket (the data set's region, and that it is readable) is s3:ListBucket on the
    data set's bucket, which may be another than the checkpoints' bucket."""
    user = Identity("arn:aws:iam::123456789012:user/spotrun", (policy.user_policy("ckpt", "sets"),))
    assert allowed(user, "s3:ListBucket", Resource("arn:aws:s3:::sets"))
    assert allowed(user, "s3:ListBucket", Resource("arn:aws:s3:::ckpt"))
    assert not allowed(user, "s3:ListBucket", Resource("arn:aws:s3:::someone-elses"))
