"""Bytes read across regions in an instance's bill (spotrun.cost.rules): charged once, at
CROSS_REGION_USD_PER_GB, when they crossed; a 'transfer' ledger line; in the total."""

from __future__ import annotations

from fractions import Fraction

from spotrun.cost import rules
from spotrun.cost.cost_lines import cost_lines


def test_a_transfer_is_billed_once_when_it_crossed() -> None:
    crossed = rules.Transfer(3 * rules.GB // 2, "us-east-1", "us-west-2", 1_000_500, "ckpt")
    usage = rules.Usage(
        "i-1", "c6i.large", "us-west-2", "us-west-2a", "on-demand", 1_000_000, 1_003_600,
        rules.Ending.USER, transfers=rules.transfers_of({rules.TRANSFERS: [crossed.to_detail()]}),
    )  # fmt: skip
    bill = rules.bill(
        usage, history=None, on_demand_rate=Fraction(1), storage_price=lambda r, t: Fraction(0)
    )
    assert bill.transfer == Fraction(3, 100)  # 1.5 GB at $0.02/GB
    assert bill.total == Fraction(1) + Fraction(3, 100)
    assert bill.total_until(1_000_500) == Fraction(500, 3600)
    assert bill.total_until(1_000_501) == Fraction(501, 3600) + Fraction(3, 100)
    (line,) = [c for c in cost_lines("run", bill) if c.kind == "transfer"]
    assert (line.quantity, line.unit, line.amount) == (1.5, "GB", Fraction(3, 100))


def test_unreadable_transfer_entries_are_left_out() -> None:
    details = {rules.TRANSFERS: [{"bytes": "many"}, {"bytes": 5, "from": "a", "to": "b", "at": 1}]}
    (only,) = rules.transfers_of(details)
    assert only.size_bytes == 5
