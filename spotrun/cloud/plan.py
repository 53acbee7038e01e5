"""Planning: which offers fit a job, in the order to try them (make_plan, a pure function),
and the offers the account's quotas cannot hold left out first (plan_launch).

The order is by expected cost to finish (spotrun.cloud.ranking): the price plus what the pool's
interruptions cost, from EC2's placement scores and the ledger's history of the pool; with no
signal that is the price order. An offer outside the region its data set lives in also pays
the data set's transfer there (spotrun.cost.rules' cross-region price), spread over the run's
expected hours."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from spotrun.cloud import ranking
from spotrun.cloud.base import Offer, Plan, Provider
from spotrun.cloud.quota_screen import ScreensQuotas
from spotrun.cloud.ranking import (
    CROSS_REGION_USD_PER_GB,
    GB,
    DataSite,
    DataTransfer,
    OffersAcrossRegions,
    Pool,
    PoolHistory,
    RunHours,
    ScoresPools,
)
from spotrun.core.config import Resources
from spotrun.core.errors import UsageError
from spotrun.core.money import show_usd_per_hour

MAX_FALLBACK_OFFERS = 12


__all__ = [
    "MAX_FALLBACK_OFFERS",
    "Plan",
    "data_transfer",
    "fits",
    "make_plan",
    "plan_launch",
    "planned_gpus",
    "sort_key",
    "with_on_demand",
]


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
    if not resources.region and resources.regions and offer.region not in resources.regions:
        return False
    return not (resources.zone and offer.zone != resources.zone)


def sort_key(offer: Offer) -> tuple[float, int, str, str]:
    # Cheapest first; at equal price fewer surplus GPUs, then a stable name order.
    return (offer.usd_per_hour, offer.gpus, offer.instance_type, offer.zone)


def make_plan(
    resources: Resources,
    offers: list[Offer],
    *,
    limit: int | None = MAX_FALLBACK_OFFERS,
    notes: Sequence[str] = (),
    scores: Mapping[Pool, int] | None = None,
    history: Mapping[Pool, PoolHistory] | None = None,
    home_region: str | None = None,
    data: DataTransfer | None = None,
) -> Plan:
    """The fitting offers by expected cost to finish (cheapest first when nothing is known of
    the pools' interruptions); `notes`: lines the reason carries below its own (offers left
    out, quotas not known); `scores`, `history`: what is known of each pool's interruptions;
    `data`: what moving the data set to another region costs."""
    fitting = sorted((o for o in offers if fits(o, resources)), key=sort_key)
    if not fitting:
        raise UsageError(_nothing_fits(resources, offers))
    ranked = ranking.rank(fitting, scores, history, home_region, data)
    ordered = [r.offer for r in ranked]
    chosen = ordered[0]
    price = "free" if chosen.usd_per_hour == 0 else show_usd_per_hour(chosen.usd_per_hour)
    first = "cheapest" if chosen.usd_per_hour <= fitting[0].usd_per_hour else "first"
    reason = (
        f"{first} of {len(fitting)} fitting offer(s): {chosen.instance_type} in {chosen.zone} "
        f"({chosen.gpus} GPU, {price})"
    )
    lines = [reason]
    if chosen.market == "spot" and 0 < chosen.usd_per_hour < float("inf"):
        lines += [ranking.why(ranked[0], data), *ranking.passed_over(ranked[0], ranked, data)]
        lines += ranking.data_unknown(data, ranked)
    reason = "\n".join([*lines, *notes])
    return Plan(ordered if limit is None else ordered[:limit], reason)


def with_on_demand(plan: Plan) -> Plan:
    """`--spot-policy auto`'s plan: the spot offers first, as planned, then the same types at
    their on-demand price, cheapest first (those with no known on-demand price left out). The
    controller holds the on-demand ones back until spot has been waited for as long as the
    run's bound allows (spotrun.control.capacity_wait), so they come last in every round."""
    spot = [o for o in plan.offers if o.market == "spot"]
    on_demand = sorted(
        (
            replace(o, market="on-demand")
            for o in spot
            if o.on_demand_usd_per_hour is not None and o.on_demand_usd_per_hour > 0
        ),
        key=sort_key,
    )
    if not on_demand:
        return plan
    cheapest = on_demand[0]
    line = (
        f"then on-demand, when spot cannot be had within the wait: {len(on_demand)} offer(s) "
        f"from {cheapest.instance_type} at {show_usd_per_hour(cheapest.on_demand_usd_per_hour)}"
    )
    return Plan([*plan.offers, *on_demand], f"{plan.reason}\n{line}")


def plan_launch(
    provider: Provider,
    resources: Resources,
    history: Mapping[Pool, PoolHistory] | None = None,
    data_site: DataSite | None = None,
    run_hours: RunHours | None = None,
) -> Plan:
    """The plan of a launch: the provider's fitting offers (from each region it may use; a
    line says which region was left out), less those the account's quotas cannot hold (a
    line says which), ranked by expected cost with the pools' placement scores,
    `history` (the ledger's reclaims per pool) and the transfer of the data set at
    `data_site` to offers elsewhere, spread over `run_hours`; when no offer is left, the
    quota's refusal is raised."""
    home = None
    notes: list[str] = []
    if isinstance(provider, OffersAcrossRegions):
        gathered = provider.regional_offers(resources)
        offers, home = gathered.offers, gathered.home_region
        notes += gathered.lines
    else:
        offers = provider.offers(resources)
    fitting = [o for o in offers if fits(o, resources)]
    if fitting and isinstance(provider, ScreensQuotas):
        screen = provider.screen_quotas(fitting, resources.nodes)
        if not screen.kept and screen.refusal is not None:
            raise screen.refusal
        offers = screen.kept
        notes += screen.lines
    scores = None
    if fitting and isinstance(provider, ScoresPools):
        scores = provider.placement_scores([o for o in offers if fits(o, resources)])
    return make_plan(
        resources,
        offers,
        notes=notes,
        scores=scores,
        history=history,
        home_region=home,
        data=None if data_site is None else data_transfer(data_site, run_hours),
    )


def data_transfer(site: DataSite, run_hours: RunHours | None = None) -> DataTransfer:
    """What moving the data set at `site` to another region costs, once, and the hours it is
    spread over (one hour when the launch said nothing)."""
    usd = None
    if site.size_bytes is not None:
        usd = float(CROSS_REGION_USD_PER_GB * site.size_bytes / GB)
    return DataTransfer(site, usd, run_hours or ranking.expected_hours(None, None))


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


def planned_gpus(plan: Plan | None, instance_type: str, requested: int) -> int:
    """The GPUs of an instance type from the run's plan; what the run asked for if unplanned."""
    offer = plan.offer_of(instance_type) if plan is not None else None
    return requested if offer is None else offer.gpus
