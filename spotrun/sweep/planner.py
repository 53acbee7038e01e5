"""Where a sweep's trials run, a pure function: one trial per instance, or packed.

Trials that need fewer GPUs than an instance has can share it, one trial per GPU
(CUDA_VISIBLE_DEVICES). Packing wins when the instance's price divided by the trials it would
really hold (its GPUs per trial, but never more than max-parallel or the trial count) is below
the cheapest way to give each trial an instance of its own.

A trial of N nodes (`--nodes N`) is a cluster run of its own: N instances of one offer, never
shared with another trial; its price per trial-hour is N times the offer's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spotrun.cloud.base import Offer, Plan
from spotrun.cloud.plan import MAX_FALLBACK_OFFERS, make_plan
from spotrun.core.config import Resources
from spotrun.core.money import show_rate


@dataclass(frozen=True)
class SweepPlan:
    offers: list[Offer]  # what each instance is asked for, best first (fallbacks after)
    trials_per_instance: int  # 1 = one trial per instance, more = packed
    gpus_per_trial: int
    usd_per_trial_hour: float  # every node of a trial together
    reason: str
    nodes: int = 1  # instances per trial (a cluster run when above 1)

    @property
    def usd_per_instance_hour(self) -> float:
        return self.usd_per_trial_hour / self.nodes

    @property
    def packed(self) -> bool:
        return self.trials_per_instance > 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "offers": [o.to_dict() for o in self.offers],
            "slots": self.trials_per_instance,  # the key ledgers and `--json` readers know
            "gpus_per_trial": self.gpus_per_trial,
            "usd_per_trial_hour": self.usd_per_trial_hour,
            "reason": self.reason,
            "nodes": self.nodes,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepPlan:
        return cls(
            offers=[Offer.from_dict(o) for o in data["offers"]],
            trials_per_instance=int(data["slots"]),
            gpus_per_trial=int(data["gpus_per_trial"]),
            usd_per_trial_hour=float(data["usd_per_trial_hour"]),
            reason=str(data["reason"]),
            nodes=int(data.get("nodes", 1)),  # sweeps planned before --nodes: one instance
        )

    def run_plan(self) -> Plan:
        """The plan each trial's run records (what `spotrun status` shows of it)."""
        return Plan(list(self.offers), self.reason)


def trials_per_instance(offer: Offer, gpus_per_trial: int, cap: int) -> int:
    if gpus_per_trial <= 0:
        return 1  # CPU trials: one per instance (they would fight over its cores)
    return max(1, min(offer.gpus // gpus_per_trial, cap))


def _price(usd: float) -> str:
    return "free" if usd == 0 else show_rate(usd)


def plan_sweep(
    resources: Resources, offers: list[Offer], *, trials: int, max_parallel: int
) -> SweepPlan:
    """Choose the offer type and trials per instance with the lowest price per trial-hour."""
    gpus = resources.gpus
    fitting = make_plan(resources, offers, limit=None).offers  # cheapest first; raises if none
    if resources.nodes > 1:
        return _cluster_plan(fitting, resources.nodes, gpus, min(trials, max_parallel))
    cap = min(trials, max_parallel)
    single = fitting[0]
    best = min(
        fitting,
        key=lambda o: (o.usd_per_hour / trials_per_instance(o, gpus, cap), -o.gpus, o.usd_per_hour),
    )
    per_instance = trials_per_instance(best, gpus, cap)
    per_packed = best.usd_per_hour / per_instance
    if per_instance > 1 and per_packed < single.usd_per_hour:
        # Fallbacks: every offer that holds as many trials, cheapest per trial-hour first.
        holding = [o for o in fitting if o.gpus >= per_instance * gpus]
        holding.sort(key=lambda o: (o.usd_per_hour, o.instance_type, o.zone))
        reason = (
            f"packing {per_instance} trials per {best.instance_type} in {best.zone} "
            f"({best.gpus} GPUs, {_price(best.usd_per_hour)}/h), one GPU each: "
            f"{_price(per_packed)} per trial-hour, below {_price(single.usd_per_hour)} for a "
            f"{single.instance_type} of its own"
        )
        return SweepPlan(holding[:MAX_FALLBACK_OFFERS], per_instance, gpus, per_packed, reason)
    why_not = ""
    shared = [o for o in fitting if trials_per_instance(o, gpus, cap) > 1]
    if shared:  # the cheapest way to pack, and what it would cost
        alt = min(shared, key=lambda o: o.usd_per_hour / trials_per_instance(o, gpus, cap))
        n = trials_per_instance(alt, gpus, cap)
        why_not = (
            f"; packing {n} per {alt.instance_type} would cost "
            f"{_price(alt.usd_per_hour / n)} per trial-hour"
        )
    elif gpus > 0 and cap > 1:
        why_not = "; no offer has GPUs for several trials"
    reason = (
        f"one trial per instance: {single.instance_type} in {single.zone} "
        f"({single.gpus} GPU, {_price(single.usd_per_hour)}/h per trial){why_not}"
    )
    return SweepPlan(fitting[:MAX_FALLBACK_OFFERS], 1, gpus, single.usd_per_hour, reason)


def _cluster_plan(fitting: list[Offer], nodes: int, gpus: int, at_once: int) -> SweepPlan:
    """Each trial a cluster of `nodes` instances of the cheapest fitting offer, never packed:
    its nodes train one job together, so no GPU of theirs is free for another trial."""
    single = fitting[0]
    per_trial = single.usd_per_hour * nodes
    reason = (
        f"one {nodes}-node cluster per trial: {nodes} x {single.instance_type} in "
        f"{single.zone} ({single.gpus} GPU each, {_price(single.usd_per_hour)}/h each, "
        f"{_price(per_trial)}/h per trial); {at_once} trial(s) at once: up to "
        f"{at_once * nodes} instances"
    )
    return SweepPlan(fitting[:MAX_FALLBACK_OFFERS], 1, gpus, per_trial, reason, nodes=nodes)
