"""The controller instance's bill: compute for its running spans only, its root volume always."""

from __future__ import annotations

from fractions import Fraction

import pytest

from spotrun.cost.controller_bill import controller_bill, running_spans
from spotrun.cost.rules import gb_months

T0 = 1_767_225_600  # 2026-01-01 00:00:00 UTC
H = 3600


def test_stopped_spans_are_cut_out_of_the_running_time() -> None:
    stopped = [[T0 + 2 * H, T0 + 5 * H], [T0 + 7 * H, T0 + 8 * H]]
    assert running_spans(T0, T0 + 10 * H, stopped) == [
        (T0, T0 + 2 * H), (T0 + 5 * H, T0 + 7 * H), (T0 + 8 * H, T0 + 10 * H),
    ]  # fmt: skip
    # an open span (stopped now) lasts until now; spans before `up` or overlapping are clipped
    assert running_spans(T0, T0 + 10 * H, [[T0 + 9 * H, None]]) == [(T0, T0 + 9 * H)]
    assert running_spans(T0, T0 + 4 * H, [[T0 - H, T0 + H], [T0 + H / 2, T0 + 2 * H]]) == [
        (T0 + 2 * H, T0 + 4 * H)
    ]


def test_compute_bills_running_hours_and_the_volume_bills_all_hours() -> None:
    bill = controller_bill(
        since=T0, now=T0 + 10 * H, stopped=[[T0 + 2 * H, T0 + 8 * H]],
        usd_per_hour=0.085, region="us-east-1", disk_gb=20,
    )  # fmt: skip
    assert bill.running_s == 4 * H and bill.stopped_s == 6 * H and bill.up_s == 10 * H
    assert bill.compute_usd == Fraction("0.085") * 4
    # gp3 in us-east-1: $0.08 per GB-month, for all ten hours of January's 744
    assert bill.storage_usd == Fraction("0.08") * 20 * gb_months(T0, T0 + 10 * H)
    assert bill.storage_usd == Fraction("0.08") * 20 * Fraction(10, 744)
    assert bill.total_usd == bill.compute_usd + bill.storage_usd
    never_stopped = controller_bill(
        since=T0, now=T0 + 10 * H, stopped=[], usd_per_hour=0.085, region="us-east-1", disk_gb=20
    )
    assert never_stopped.compute_usd == Fraction("0.085") * 10
    assert never_stopped.storage_usd == bill.storage_usd  # a stopped instance's volume bills


def test_each_start_bills_a_minute_at_least_and_unknown_prices_stay_unknown() -> None:
    bill = controller_bill(
        since=T0, now=T0 + 2 * H, stopped=[[T0 + 10, T0 + 2 * H - 5]],
        usd_per_hour=3.6, region="us-east-1", disk_gb=20,
    )  # fmt: skip
    assert bill.running_s == 15
    assert bill.compute_usd == pytest.approx(Fraction(120, 1000))  # 2 x 60 s at $0.001/s
    unknown = controller_bill(
        since=T0, now=T0 + H, stopped=[], usd_per_hour=None, region="mars-1", disk_gb=20
    )
    assert unknown.compute_usd is None and unknown.storage_usd is None
    assert unknown.total_usd is None
