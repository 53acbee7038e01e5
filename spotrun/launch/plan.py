"""Planning, a pure function: which offers fit a job, in the order to try them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spotrun.cloud.base import Offer
from spotrun.core.config import Resources
from spotrun.core.errors import UsageError

MAX_FALLBACK_OFFERS = 12


@dataclass(frozen=True)
class Plan:
    offers: list[Offer]  # cheapest first; the controller falls back along this list
    reason: str

    @property
    def chosen(self) -> Offer:
        return self.offers[0]

    def to_dict(self) -> dict[str, Any]:
        return {"offers": [o.to_dict() for o in self.offers], "reason": self.reason}


def fits(offer: Offer, resources: Resources) -> bool:
    if offer.gpus < resources.gpus:
        return False
    model_wanted = resources.gpu_model if resources.gpus else None
    if model_wanted and (offer.gpu_model or "").lower() != model_wanted.lower():
        return False
    # GPU model and memory only mean something when GPUs are asked for (gpus=0: a CPU run).
    memory_wanted = resources.gpu_memory_gb if resources.gpus else None
    if memory_wanted and (offer.gpu_memory_gb or 0) < memory_wanted:
        return False
    if resources.instance_type and offer.instance_type != resources.instance_type:
        return False
    if resources.region and offer.region != resources.region:
        return False
    return not (resources.zone and offer.zone != resources.zone)


def sort_key(offer: Offer) -> tuple[float, int, str, str]:
    # Cheapest first; at equal price fewer surplus GPUs, then a stable name order.
    return (offer.usd_per_hour, offer.gpus, offer.instance_type, offer.zone)


def make_plan(
    resources: Resources, offers: list[Offer], *, limit: int | None = MAX_FALLBACK_OFFERS
) -> Plan:
    fitting = sorted((o for o in offers if fits(o, resources)), key=sort_key)
    if not fitting:
        raise UsageError(_nothing_fits(resources, offers))
    chosen = fitting[0]
    price = "free" if chosen.usd_per_hour == 0 else f"${chosen.usd_per_hour:.4f}/h"
    reason = (
        f"cheapest of {len(fitting)} fitting offer(s): {chosen.instance_type} in {chosen.zone} "
        f"({chosen.gpus} GPU, {price})"
    )
    return Plan(fitting if limit is None else fitting[:limit], reason)


def _nothing_fits(resources: Resources, offers: list[Offer]) -> str:
    wanted = [f"{resources.gpus} GPU(s)"]
    if resources.gpu_model:
        wanted.append(f"model {resources.gpu_model}")
    if resources.gpus and resources.gpu_memory_gb:
        wanted.append(f">= {resources.gpu_memory_gb:g} GB per GPU")
    if resources.instance_type:
        wanted.append(f"type {resources.instance_type}")
    if resources.zone:
        wanted.append(f"zone {resources.zone}")
    counts = sorted({o.gpus for o in offers if o.gpus})
    have = f"; offered GPU counts: {', '.join(map(str, counts))}" if counts else ""
    return f"no offer has {', '.join(wanted)}{have}"


def planned_offer(plan: dict[str, Any] | None, instance_type: str) -> dict[str, Any] | None:
    """The offer of that instance type among those a run was planned with, as stored."""
    for offer in (plan or {}).get("offers", []):
        if offer.get("instance_type") == instance_type:
            return dict(offer)
    return None


def planned_gpus(plan: dict[str, Any] | None, instance_type: str, requested: int) -> int:
    """The GPUs of an instance type from the run's plan; what the run asked for if unplanned."""
    offer = planned_offer(plan, instance_type)
    return requested if offer is None else int(offer.get("gpus") or 0)
