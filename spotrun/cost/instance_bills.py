"""One instance's bill: its usage from the ledger's record, priced by spotrun.cost.rules.

Both a run's bill (spotrun.cost.bills) and a pack instance's split into shares
(spotrun.cost.pack_shares) start here, so neither has to reach into the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spotrun.core.errors import PricingError
from spotrun.cost import amounts
from spotrun.cost import rules as cost
from spotrun.cost.ebs_prices import gb_month_usd
from spotrun.cost.prices import PriceBook
from spotrun.store.ledger import InstanceRecord, RunRecord

if TYPE_CHECKING:
    from spotrun.core.config import Settings

MARKETS: tuple[cost.Market, ...] = ("spot", "on-demand", "local")


def volumes_of(
    record: InstanceRecord, run: RunRecord, settings: Settings
) -> tuple[cost.Volume, ...]:
    if record.market == "local":
        return ()
    listed = record.details.get("volumes")
    if listed is None:
        size = run.spec.resources.disk_gb or settings.run.root_volume_gb
        return (cost.Volume(size_gb=size),)
    try:
        return tuple(_volume(v) for v in listed)
    except (TypeError, KeyError, ValueError) as exc:
        raise PricingError(
            f"instance {record.id} has a malformed volume list in the ledger ({exc}): {listed!r}"
        ) from exc


def _volume(item: dict[str, Any]) -> cost.Volume:
    def second(key: str) -> int | None:
        value = item.get(key)
        return None if value is None else amounts.whole_second(float(value))

    return cost.Volume(
        size_gb=int(item["size_gb"]),
        volume_type=str(item.get("type", "gp3")),
        created_at=second("created_at"),
        deleted_at=second("deleted_at"),
    )


def usage_of(
    record: InstanceRecord, run: RunRecord, settings: Settings, now: float
) -> cost.Usage | None:
    """The instance's usage, or None if it never launched (nothing to bill)."""
    if record.launched_at is None:
        return None
    if record.market not in MARKETS:
        raise PricingError(f"instance {record.id} has an unknown market '{record.market}'")
    ended = record.terminated_at is not None or run.is_terminal
    if record.terminated_at is not None:
        end = record.terminated_at
    elif run.is_terminal and run.ended_at is not None:
        end = run.ended_at  # the run ended without the instance's own end being recorded
    else:
        end = now
    start = amounts.whole_second(record.launched_at)
    if record.market != "local" and not record.region:
        raise PricingError(f"instance {record.id} has no region in the ledger; cannot price it")
    return cost.Usage(
        instance_id=record.id,
        instance_type=record.instance_type,
        region=record.region or "local",
        zone=record.zone or "",
        market=record.market,  # narrowed to a Market by the check above
        start=start,
        end=max(start, amounts.whole_second(end)),
        ending=cost.ending_of(record.end_reason, ended=ended),
        volumes=volumes_of(record, run, settings),
        transfers=cost.transfers_of(record.details),
    )


def bill_instance(
    record: InstanceRecord, usage: cost.Usage, book: PriceBook, offline: bool
) -> cost.Bill:
    """One instance's bill for `usage`, at the prices `book` gives (its own, not shared)."""
    if usage.market == "local":
        return cost.bill(usage, history=None, on_demand_rate=None, storage_price=gb_month_usd)
    history = None
    needs_history = usage.market == "spot" and not usage.interrupted_free
    if needs_history:
        billed_end = usage.start + cost.billed_seconds(usage)
        history = book.spot_history(
            record.provider,
            usage.region,
            usage.zone,
            usage.instance_type,
            usage.start,
            max(usage.end, billed_end),
            offline=offline,
        )
    rate = book.on_demand(record.provider, usage.region, usage.instance_type, offline=offline)
    return cost.bill(usage, history=history, on_demand_rate=rate, storage_price=gb_month_usd)
