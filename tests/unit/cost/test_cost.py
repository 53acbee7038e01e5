"""Billing rules on price histories we construct: each case worked out by hand, exactly."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction as F

import pytest

from spotlab.prices import utc
from spotrun.core.errors import PricingError
from spotrun.cost import amounts
from spotrun.cost import rules as cost
from spotrun.cost.cost_lines import cost_lines
from spotrun.cost.ebs_prices import gb_month_usd
from spotrun.cost.price_history import PriceHistory
from spotrun.cost.rules import Ending, Usage, Volume

T0 = utc("2025-03-10 09:00:00")
TYPE, ZONE = "g5.xlarge", "us-east-1a"


def history(*points: tuple[float, str]) -> PriceHistory:
    return PriceHistory.from_points(TYPE, ZONE, [(at, price) for at, price in points])


def usage(
    start: int,
    end: int,
    ending: Ending = Ending.USER,
    *,
    market: cost.Market = "spot",
    zone: str = ZONE,
    volumes: tuple[Volume, ...] = (),
) -> Usage:
    return Usage("i-1", TYPE, "us-east-1", zone, market, start, end, ending, volumes)


def bill_of(u: Usage, h: PriceHistory | None, on_demand: str | None = "1.006") -> cost.Bill:
    return cost.bill(
        u,
        history=h,
        on_demand_rate=F(on_demand) if on_demand else None,
        storage_price=gb_month_usd,
    )


def test_price_change_mid_run_charges_each_side_at_its_price() -> None:
    h = history((T0 - 5000, "0.40"), (T0 + 2232, "0.52"))  # 0.52 from 09:37:12
    b = bill_of(usage(T0, T0 + 3600), h)
    assert b.compute == F(2232) * F("0.40") / 3600 + F(1368) * F("0.52") / 3600
    assert b.billed_s == 3600
    assert b.on_demand == F("1.006")
    assert amounts.format_usd(b.compute) == "$0.45"  # 0.248 + 0.1976 = 0.4456


def test_a_change_at_an_exact_second_takes_that_second() -> None:
    h = history((T0 - 100, "0.30"), (T0 + 30, "0.90"))
    b = bill_of(usage(T0, T0 + 60), h)
    # seconds T0..T0+29 at 0.30, T0+30..T0+59 at 0.90
    assert b.compute == (30 * F("0.30") + 30 * F("0.90")) / 3600
    assert h.price_at(T0 + 29) == F("0.30") and h.price_at(T0 + 30) == F("0.90")


def test_a_change_stamped_within_a_second_holds_from_the_next() -> None:
    h = history((T0 - 100, "0.30"), (T0 + 29.5, "0.90"))
    assert h.price_at(T0 + 29) == F("0.30") and h.price_at(T0 + 30) == F("0.90")


def test_sub_minute_run_pays_a_minute_at_the_prices_of_that_minute() -> None:
    h = history((T0 - 100, "0.30"), (T0 + 40, "0.60"))
    b = bill_of(usage(T0, T0 + 20), h)
    assert b.billed_s == 60
    assert b.compute == (40 * F("0.30") + 20 * F("0.60")) / 3600
    assert b.on_demand == 60 * F("1.006") / 3600  # on demand has the same minimum


def test_aws_interruption_in_the_first_hour_is_free() -> None:
    h = history((T0 - 100, "0.40"))
    b = bill_of(usage(T0, T0 + 3599, Ending.AWS_INTERRUPTION, volumes=(Volume(100),)), h)
    assert b.compute == 0 and b.billed_s == 0
    assert b.storage > 0  # EBS is billed whoever ends the instance
    assert b.on_demand == 3599 * F("1.006") / 3600  # an on-demand one would have paid


def test_aws_interruption_needs_no_history_when_free() -> None:
    b = bill_of(usage(T0, T0 + 600, Ending.AWS_INTERRUPTION), None)
    assert b.compute == 0


def test_aws_interruption_after_the_first_hour_pays_every_second() -> None:
    h = history((T0 - 100, "0.40"))
    at_hour = bill_of(usage(T0, T0 + 3600, Ending.AWS_INTERRUPTION), h)
    assert at_hour.compute == F("0.40")
    later = bill_of(usage(T0, T0 + 5400, Ending.AWS_INTERRUPTION), h)
    assert later.compute == F("0.60")


def test_user_termination_in_the_first_hour_pays_its_seconds() -> None:
    h = history((T0 - 100, "0.40"))
    b = bill_of(usage(T0, T0 + 1800, Ending.USER), h)
    assert b.compute == F("0.20")


def test_live_instance_is_charged_up_to_now_even_when_young() -> None:
    h = history((T0 - 100, "0.36"))
    b = bill_of(usage(T0, T0 + 600, Ending.LIVE), h)
    assert b.compute == F("0.06")


def test_each_zone_bills_from_its_own_history() -> None:
    a = PriceHistory.from_points(TYPE, "us-east-1a", [(T0 - 10, "0.40")])
    b = PriceHistory.from_points(TYPE, "us-east-1b", [(T0 - 10, "0.25")])
    in_a = bill_of(usage(T0, T0 + 3600, zone="us-east-1a"), a)
    in_b = bill_of(usage(T0, T0 + 3600, zone="us-east-1b"), b)
    assert (in_a.compute, in_b.compute) == (F("0.40"), F("0.25"))


def test_on_demand_instance_bills_at_its_rate() -> None:
    b = bill_of(usage(T0, T0 + 1800, market="on-demand"), None, on_demand="1.006")
    assert b.compute == F("0.503") and b.on_demand == F("0.503")
    with pytest.raises(PricingError, match="no on-demand price"):
        bill_of(usage(T0, T0 + 1800, market="on-demand"), None, on_demand=None)


def test_empty_history_is_an_error_not_zero() -> None:
    with pytest.raises(PricingError, match="history of g5.xlarge in us-east-1a is empty"):
        PriceHistory.from_points(TYPE, ZONE, [])
    with pytest.raises(PricingError, match="no spot price history"):
        bill_of(usage(T0, T0 + 3600), None)


def test_history_that_starts_after_the_instance_is_an_error() -> None:
    h = history((T0 + 10, "0.40"))
    with pytest.raises(PricingError, match="history starts at 2025-03-10 09:00:10"):
        bill_of(usage(T0, T0 + 3600), h)


def test_negative_or_non_finite_prices_are_refused() -> None:
    with pytest.raises(PricingError, match="negative"):
        history((T0, "-0.1"))
    with pytest.raises(PricingError, match="finite"):
        amounts.usd(float("nan"))


def test_unchanged_points_collapse_and_same_second_points_keep_the_later() -> None:
    h = history((T0, "0.4"), (T0 + 10, "0.4"), (T0 + 20, "0.5"), (T0 + 20, "0.6"))
    assert h.steps == ((T0, F("0.4")), (T0 + 20, F("0.6")))


def test_volume_storage_by_gb_month_across_a_month_end() -> None:
    feb_end = utc("2025-03-01 00:00:00")
    u = usage(feb_end - 86400, feb_end + 86400, volumes=(Volume(200),))
    b = bill_of(u, history((feb_end - 90000, "0.40")))
    # one day of February 2025 (28 days) and one of March (31 days), 200 GB at $0.08
    assert b.storage == F("0.08") * 200 * (F(1, 28) + F(1, 31))
    (charge,) = b.volumes
    assert charge.gb_months == 200 * (F(1, 28) + F(1, 31))
    assert feb_end in b.change_points()


def test_volume_with_its_own_life_and_minimum() -> None:
    u = usage(T0, T0 + 3600, volumes=(Volume(50, created_at=T0 - 100, deleted_at=T0 - 90),))
    b = bill_of(u, history((T0 - 1, "0.1")))
    (charge,) = b.volumes
    assert (charge.start, charge.stop) == (T0 - 100, T0 - 40)  # 10 s of life, billed 60


def test_unknown_storage_region_is_an_error() -> None:
    u = Usage(
        "i-1", TYPE, "sa-east-1", "sa-east-1a", "spot", T0, T0 + 60, Ending.USER, (Volume(8),)
    )
    with pytest.raises(PricingError, match="no gp3 storage price for region sa-east-1"):
        bill_of(u, PriceHistory.from_points(TYPE, "sa-east-1a", [(T0, "0.1")]))


def test_local_instance_costs_nothing_and_records_its_seconds() -> None:
    u = usage(T0, T0 + 42, market="local")
    b = bill_of(u, None, on_demand=None)
    assert (b.total, b.on_demand, b.billed_s) == (0, 0, 42)
    (line,) = cost_lines("run1", b)
    assert (line.unit, line.quantity, line.usd, line.method) == (
        "instance-s",
        42.0,
        0.0,
        cost.LOCAL_METHOD,
    )


def test_cost_lines_carry_exact_amounts() -> None:
    h = history((T0 - 5000, "0.40"), (T0 + 2232, "0.52"))
    b = bill_of(usage(T0, T0 + 3600, volumes=(Volume(200),)), h)
    compute, storage = cost_lines("run1", b)
    assert compute.usd_exact == b.compute and compute.kind == "compute"
    assert storage.usd_exact == b.storage and storage.unit == "GB-month"
    assert compute.on_demand_usd_exact == F("1.006")


def test_cents_round_half_up_only_for_display() -> None:
    assert amounts.to_cents(F(1, 200)) == Decimal("0.01")
    assert amounts.to_cents(F(1, 201)) == Decimal("0.00")
    assert amounts.format_usd(F(123456789, 100)) == "$1,234,567.89"
    assert amounts.usd(0.3871) == F("0.3871")


def test_ending_is_read_from_ec2_state_reason_code() -> None:
    assert (
        cost.ending_of("Server.SpotInstanceTermination: Spot instance termination", ended=True)
        is Ending.AWS_INTERRUPTION
    )
    assert cost.ending_of("User initiated (2025-03-10 10:00:00 GMT)", ended=True) is Ending.USER
    assert cost.ending_of(None, ended=False) is Ending.LIVE


def test_spend_accrues_linearly_between_change_points() -> None:
    h = history((T0 - 5000, "0.40"), (T0 + 2232, "0.52"), (T0 + 4500, "0.37"))
    b = bill_of(usage(T0, T0 + 7530, volumes=(Volume(200),)), h)
    points = b.change_points()
    assert points == [T0, T0 + 2232, T0 + 4500, T0 + 7530]
    for a, z in zip(points, points[1:]):
        mid = (a + z) // 2
        line = b.total_until(a) + (b.total_until(z) - b.total_until(a)) * F(mid - a, z - a)
        assert b.total_until(mid) == line
    assert b.total_until(T0 + 10**6) == b.total
