"""Sweeps whose trials run on N nodes (`spotrun sweep ... --nodes N`): the planner's and the
budget's accounting count N instances per trial, and such trials are never packed."""

from __future__ import annotations

from fractions import Fraction

import pytest

from spotrun.cloud.base import Offer
from spotrun.core.config import Resources
from spotrun.cost import budget
from spotrun.sweep.planner import SweepPlan, plan_sweep
from spotrun.sweep.spend import next_trial


def _offer(kind: str, gpus: int, price: float, zone: str = "us-east-1a") -> Offer:
    return Offer(
        "aws", kind, "us-east-1", zone, gpus, "A10G", 24.0, 4 * gpus, 16.0 * gpus, price, 3 * price
    )


# Packing 4 one-GPU trials on the 4-GPU type would be cheaper per trial-hour (0.30 < 0.44).
OFFERS = [_offer("g5.xlarge", 1, 0.44), _offer("g5.12xlarge", 4, 1.2, "us-east-1b")]


def test_a_trial_of_two_nodes_costs_two_instances_and_is_never_packed() -> None:
    plan = plan_sweep(Resources(gpus=1, nodes=2), OFFERS, trials=6, max_parallel=3)
    assert plan.nodes == 2 and plan.trials_per_instance == 1 and not plan.packed
    assert plan.offers[0].instance_type == "g5.xlarge"  # the cheapest instance per node
    assert plan.usd_per_trial_hour == pytest.approx(0.88)
    assert plan.usd_per_instance_hour == pytest.approx(0.44)
    assert plan.reason == (
        "one 2-node cluster per trial: 2 x g5.xlarge in us-east-1a (1 GPU each, $0.4400/h "
        "each, $0.8800/h per trial); 3 trial(s) at once: up to 6 instances"
    )
    # the same offers with one node per trial pack, as before
    assert plan_sweep(Resources(gpus=1), OFFERS, trials=6, max_parallel=4).packed


def test_the_plan_keeps_its_nodes_through_the_store_and_old_plans_read_as_one() -> None:
    plan = plan_sweep(Resources(gpus=1, nodes=3), OFFERS, trials=2, max_parallel=2)
    again = SweepPlan.from_dict(plan.to_dict())
    assert again == plan and again.nodes == 3
    old = plan.to_dict()
    del old["nodes"]  # a sweep stored before --nodes existed
    assert SweepPlan.from_dict(old).nodes == 1


def test_the_budget_projects_every_node_of_the_next_trial() -> None:
    """A trial of N nodes adds N instances, each with its own one-minute minimum."""
    now = 1_000_000
    one = plan_sweep(Resources(gpus=1), OFFERS[:1], trials=1, max_parallel=1)
    two = plan_sweep(Resources(gpus=1, nodes=2), OFFERS[:1], trials=1, max_parallel=1)
    assert len(next_trial(one, now)) == 1 and len(next_trial(two, now)) == 2
    assert {i.usd_per_hour for i in next_trial(two, now)} == {Fraction("0.44")}
    at = now + 180
    single = budget.spend_at(at, now, Fraction(0), next_trial(one, now))
    double = budget.spend_at(at, now, Fraction(0), next_trial(two, now))
    assert double == 2 * single == Fraction("0.44") * 2 * 120 / 3600
