"""Ranking offers by expected cost to finish (spotrun.cloud.ranking), the plan's order and
words (spotrun.cloud.plan.make_plan), and the ledger's history of each pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotrun.cloud import ranking
from spotrun.cloud.base import Offer
from spotrun.cloud.plan import make_plan
from spotrun.cloud.ranking import PoolHistory
from spotrun.core.config import LaunchSpec, Resources, load_settings
from spotrun.service.pool_history import recorded_history
from spotrun.store.ledger import InstanceRecord, Ledger


def offer(zone: str, price: float, instance_type: str = "g5.xlarge") -> Offer:
    return Offer(
        provider="aws",
        instance_type=instance_type,
        region=zone[:-1],
        zone=zone,
        gpus=1,
        gpu_model="A10G",
        gpu_memory_gb=24.0,
        vcpus=4,
        memory_gb=16.0,
        spot_usd_per_hour=price,
        on_demand_usd_per_hour=1.006,
    )


def test_score_maps_to_a_rate_between_its_anchors() -> None:
    assert ranking.score_rate(10) == pytest.approx(ranking.SCORE_10_RATE)
    assert ranking.score_rate(1) == pytest.approx(ranking.SCORE_1_RATE)
    rates = [ranking.score_rate(s) for s in range(1, 11)]
    assert rates == sorted(rates, reverse=True)  # a lower score, a higher rate
    # geometric: each step down multiplies the rate by the same factor
    steps = {round(a / b, 9) for a, b in zip(rates, rates[1:], strict=False)}
    assert len(steps) == 1
    assert ranking.score_rate(None) == ranking.score_rate(ranking.UNSCORED)
    assert ranking.score_rate(0) == ranking.score_rate(1)  # out of range: clamped


def test_history_updates_the_prior() -> None:
    prior = ranking.score_rate(7)
    assert ranking.interruption_rate(7, None) == prior
    assert ranking.interruption_rate(7, PoolHistory(0, 0.0)) == pytest.approx(prior)
    # 2 reclaims in 30 h: (2 + prior x 10) / (30 + 10)
    two_in_30 = ranking.interruption_rate(7, PoolHistory(2, 30.0))
    assert two_in_30 == pytest.approx((2 + prior * ranking.PRIOR_HOURS) / 40)
    # a long quiet history outweighs a poor score
    assert ranking.interruption_rate(1, PoolHistory(0, 1000.0)) < ranking.score_rate(10)


def test_expected_cost_adds_what_interruptions_cost() -> None:
    assert ranking.expected_usd_per_hour(0.42, 0.0) == 0.42
    expected = ranking.expected_usd_per_hour(0.42, 0.1)
    assert expected == pytest.approx(0.42 * (1 + 0.1 * ranking.INTERRUPTION_COST_H))
    assert ranking.expected_usd_per_hour(float("inf"), 0.1) == float("inf")


def test_a_noisy_pool_ranks_behind_a_slightly_dearer_quiet_one() -> None:
    noisy, quiet = offer("us-east-1a", 0.40), offer("us-east-1b", 0.42)
    history = {("g5.xlarge", "us-east-1a"): PoolHistory(3, 10.0)}
    ranked = ranking.rank([noisy, quiet], history=history)
    assert [r.offer.zone for r in ranked] == ["us-east-1b", "us-east-1a"]
    # a low placement score beside a high one does the same without any history (it says
    # less than a history: a smaller price gap)
    scores = {("g5.xlarge", "us-east-1a"): 1, ("g5.xlarge", "us-east-1b"): 10}
    ranked = ranking.rank([noisy, offer("us-east-1b", 0.41)], scores=scores)
    assert ranked[0].offer.zone == "us-east-1b"
    # and with nothing known the cheaper one wins: the order is the price's
    assert ranking.rank([quiet, noisy])[0].offer.zone == "us-east-1a"


def test_at_equal_cost_the_home_region_comes_first() -> None:
    east, west = offer("us-east-1a", 0.40), offer("us-west-2a", 0.40)
    assert ranking.rank([west, east], home_region="us-east-1")[0].offer is east
    assert ranking.rank([east, west], home_region="us-west-2")[0].offer is west


def test_the_plan_says_why_it_chose_and_what_it_passed_over() -> None:
    noisy, quiet = offer("us-east-1a", 0.40), offer("us-east-1b", 0.42)
    plan = make_plan(
        Resources(gpus=1),
        [noisy, quiet],
        scores={("g5.xlarge", "us-east-1b"): 7},
        history={("g5.xlarge", "us-east-1a"): PoolHistory(3, 10.0)},
    )
    assert plan.offers == [quiet, noisy]
    lines = plan.reason.splitlines()
    assert lines[0].startswith("first of 2 fitting offer(s): g5.xlarge in us-east-1b")
    assert lines[1].startswith("chose g5.xlarge in us-east-1b: $0.4200/h, expected $0.4")
    assert "(score 7, no reclaims recorded here)" in lines[1]
    assert lines[2].startswith("passed over g5.xlarge in us-east-1a ($0.4000/h): expected")
    assert "3 reclaim(s) in 10 h" in lines[2]


def test_regions_narrow_what_fits() -> None:
    east, west = offer("us-east-1a", 0.40), offer("us-west-2a", 0.30)
    plan = make_plan(Resources(gpus=1, regions=["us-east-1"]), [east, west])
    assert plan.offers == [east]


def test_the_ledger_counts_reclaims_and_hours_per_pool(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "home")
    now = 1_800_000_000.0
    with Ledger(settings) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="aws"))

        def record(iid: str, zone: str, hours: float, reason: str | None, ago_h: float) -> None:
            start = now - ago_h * 3600
            ledger.upsert_instance(
                InstanceRecord(
                    id=iid, run_id=run.id, provider="aws", instance_type="g5.xlarge",
                    market="spot", state="terminated", region="us-east-1", zone=zone,
                    launched_at=start, terminated_at=start + hours * 3600, end_reason=reason,
                )
            )  # fmt: skip

        reclaim = "Server.SpotInstanceTermination: Spot instance termination"
        record("i-1", "us-east-1a", 10.0, reclaim, 50)
        record("i-2", "us-east-1a", 20.0, "Server.SpotInstanceShutdown: stopped", 30)
        record("i-3", "us-east-1b", 5.0, "terminated by spotrun", 10)
        record("i-old", "us-east-1b", 5.0, reclaim, 24 * 60)  # before the window
    history = recorded_history(settings, now=now)
    assert history == {
        ("g5.xlarge", "us-east-1a"): PoolHistory(2, pytest.approx(30.0)),  # type: ignore[arg-type]
        ("g5.xlarge", "us-east-1b"): PoolHistory(0, pytest.approx(5.0)),  # type: ignore[arg-type]
    }
