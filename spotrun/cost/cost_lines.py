"""The ledger's cost lines of an instance's bill: its compute, then each volume's storage, then
each transfer of bytes across regions (a share of a pack instance: its part of the compute and
of the storage)."""

from __future__ import annotations

from fractions import Fraction

from spotrun.cloud.ranking import GB
from spotrun.cost.rules import AWS_METHOD, LOCAL_METHOD, TRANSFER_METHOD, Bill, Transfer, Usage
from spotrun.cost.share_bill import ShareBill
from spotrun.store.ledger import CostLine


def compute_line(
    run_id: str,
    usage: Usage,
    billed_s: int,
    compute: Fraction,
    on_demand: Fraction | None,
    method: str,
) -> CostLine:
    """The ledger line of an instance's compute: whole, or a share's part of it."""
    return CostLine(
        run_id=run_id,
        instance_id=usage.instance_id,
        kind="compute",
        quantity=float(billed_s),
        unit="instance-s",
        usd=float(compute),
        on_demand_usd=None if on_demand is None else float(on_demand),
        method=method,
        usd_exact=compute,
        on_demand_usd_exact=on_demand,
        start_at=float(usage.start),
        end_at=float(usage.end),
    )


def cost_lines(run_id: str, bill_: Bill) -> list[CostLine]:
    """The ledger's lines for one instance: compute, then one per volume."""
    if isinstance(bill_, ShareBill):
        return share_lines(run_id, bill_)
    usage = bill_.usage
    if usage.market == "local":
        return [
            CostLine(
                run_id=run_id,
                instance_id=usage.instance_id,
                kind="compute",
                quantity=float(usage.runtime_s),
                unit="instance-s",
                usd=0.0,
                on_demand_usd=0.0,
                method=LOCAL_METHOD,
                usd_exact=Fraction(0),
                on_demand_usd_exact=Fraction(0),
                start_at=float(usage.start),
                end_at=float(usage.end),
            )
        ]
    on_demand = bill_.on_demand
    lines = [compute_line(run_id, usage, bill_.billed_s, bill_.compute, on_demand, AWS_METHOD)]
    for charge in bill_.volumes:
        lines.append(
            CostLine(
                run_id=run_id,
                instance_id=usage.instance_id,
                kind="storage",
                quantity=float(charge.gb_months),
                unit="GB-month",
                usd=float(charge.total),
                on_demand_usd=float(charge.total),
                method=AWS_METHOD,
                usd_exact=charge.total,
                on_demand_usd_exact=charge.total,
                start_at=float(charge.start),
                end_at=float(charge.stop),
            )
        )
    lines += [transfer_line(run_id, usage.instance_id, t) for t in usage.transfers]
    return lines


def transfer_line(run_id: str, instance_id: str, transfer: Transfer) -> CostLine:
    """The ledger line of bytes an instance read across regions, in GB (AWS bills per GB)."""
    return CostLine(
        run_id=run_id,
        instance_id=instance_id,
        kind="transfer",
        quantity=transfer.size_bytes / GB,
        unit="GB",
        usd=float(transfer.usd),
        on_demand_usd=float(transfer.usd),
        method=f"{TRANSFER_METHOD}: {transfer.source_region} to {transfer.target_region}",
        usd_exact=transfer.usd,
        on_demand_usd_exact=transfer.usd,
        start_at=float(transfer.at),
        end_at=float(transfer.at),
    )


def share_lines(run_id: str, part: ShareBill) -> list[CostLine]:
    """A pack instance's share's lines: its part of the compute and of the storage."""
    usage = part.usage
    whole = part.whole
    assert whole is not None  # a share's part is always made with its instance's bill
    method = (
        f"{AWS_METHOD}; a shared instance ({whole.usage.instance_id}): each second "
        f"split equally between the runs on it in that second"
    )
    on_demand = part.on_demand
    storage = part.storage
    return [
        compute_line(run_id, usage, part.billed_s, part.compute, on_demand, method),
        CostLine(
            run_id=run_id,
            instance_id=usage.instance_id,
            kind="storage",
            quantity=float(sum((fraction * (b - a) for a, b, fraction in part.spans), Fraction(0))),
            unit="shared-instance-s",
            usd=float(storage),
            on_demand_usd=float(storage),
            method=method,
            usd_exact=storage,
            on_demand_usd_exact=storage,
            start_at=float(usage.start),
            end_at=float(part.billed_stop),
        ),
    ]
