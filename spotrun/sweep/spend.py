"""What a sweep has spent, and what is billing now.

The inputs of its budget (spotrun.cost.budget).
"""

from __future__ import annotations

from fractions import Fraction

from spotrun.cost import budget
from spotrun.cost.bills import run_cost
from spotrun.store.ledger import Ledger
from spotrun.store.price_cache import PriceCache
from spotrun.store.sweeps import SweepRecord, SweepStore
from spotrun.sweep.planner import SweepPlan


def _price_now(
    ledger: Ledger, plan: SweepPlan, region: str | None, zone: str | None, instance_type: str
) -> Fraction:
    """The last cached spot price of the type in its zone, else the price it was planned at."""
    if region and zone:
        points = PriceCache(ledger).price_points(region, zone, instance_type)
        if points:
            return Fraction(repr(points[-1][1]))
    for offer in plan.offers:
        if offer.instance_type == instance_type and (zone is None or offer.zone == zone):
            return Fraction(repr(offer.usd_per_hour))
    return Fraction(repr(plan.usd_per_instance_hour))


def sweep_spend(
    ledger: Ledger, store: SweepStore, sweep: SweepRecord
) -> tuple[Fraction, list[budget.LiveInstance]]:
    """The sweep's spend so far (its trials' bills, packed shares included) and every instance
    of it that bills now, at its price now."""
    assert sweep.plan is not None
    plan = SweepPlan.from_dict(sweep.plan)
    spent = Fraction(0)
    live: list[budget.LiveInstance] = []
    for trial in store.trials(sweep.id):
        if trial.run_id is None:
            continue
        run = ledger.get_run(trial.run_id)
        spent += run_cost(ledger, run) or Fraction(0)
        if run.is_terminal or trial.pack_id is not None:
            continue
        for inst in ledger.instances(run.id):
            if inst.terminated_at is None and inst.launched_at is not None:
                price = _price_now(ledger, plan, inst.region, inst.zone, inst.instance_type)
                live.append(budget.LiveInstance(int(inst.launched_at), price))
    for pack in store.packs(sweep.id):
        for shared in store.pack_instances(pack.id):
            if shared.terminated_at is None and shared.launched_at is not None:
                price = _price_now(ledger, plan, shared.region, shared.zone, shared.instance_type)
                live.append(budget.LiveInstance(int(shared.launched_at), price))
    return spent, live


def next_trial(plan: SweepPlan, now: int) -> list[budget.LiveInstance]:
    """What one more trial would bill from `now`: each of its nodes at the planned price, each
    with its own one-minute minimum."""
    price = Fraction(repr(plan.usd_per_instance_hour))
    return [budget.LiveInstance(now, price) for _ in range(plan.nodes)]


# A trial can run slower than any before it (a busier host, a slower zone): planning on the
# longest one so far, with this much more, keeps the budget from stopping one half-way.
SLOWER_TRIAL_ALLOWANCE = 1.25


def expected_trial_s(durations_s: list[float]) -> float | None:
    """What one more trial is expected to run, on the cautious side: the longest of the trials
    that ran to their end, a quarter longer (None before the first one has)."""
    if not durations_s:
        return None
    return max(durations_s) * SLOWER_TRIAL_ALLOWANCE


def left_to_finish(
    trial_s: float, usd_per_trial_hour: Fraction, live_elapsed_s: list[float]
) -> Fraction:
    """What the live trials are expected to spend until they end, at the price now."""
    seconds = sum(max(0.0, trial_s - elapsed) for elapsed in live_elapsed_s)
    return usd_per_trial_hour * Fraction(repr(seconds)) / 3600


def can_finish_another(
    spent: Fraction,
    cap: Fraction,
    trial_s: float,
    usd_per_trial_hour: Fraction,
    live_elapsed_s: list[float],
    margin_s: float,
) -> bool:
    """Whether the budget left, once the live trials have finished (they go first: a trial
    under way is worth more than a new one), still pays for one more whole trial and its stop."""
    one_more = usd_per_trial_hour * Fraction(repr(trial_s + margin_s)) / 3600
    committed = spent + left_to_finish(trial_s, usd_per_trial_hour, live_elapsed_s)
    return committed + one_more <= cap
