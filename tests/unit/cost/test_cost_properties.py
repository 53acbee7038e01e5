"""Properties of the billing integral against a brute-force per-second sum (hypothesis)."""

from __future__ import annotations

from fractions import Fraction as F

from hypothesis import given, settings
from hypothesis import strategies as st

from spotrun.cost import amounts
from spotrun.cost import rules as cost
from spotrun.cost.ebs_prices import gb_month_usd
from spotrun.cost.price_history import PriceHistory
from spotrun.cost.rules import Ending, Usage, Volume

T0 = 1_741_597_200  # 2025-03-10 09:00:00 UTC

# Spot prices as AWS publishes them: up to 6 decimals of a dollar per hour.
prices = st.integers(min_value=0, max_value=40_000_000).map(lambda micro: F(micro, 1_000_000))
# Change times, some on fractions of a second, around a ~3 hour window.
times = st.one_of(
    st.integers(min_value=T0 - 7200, max_value=T0 + 10_800),
    st.floats(min_value=T0 - 7200, max_value=T0 + 10_800, allow_nan=False),
)
histories = st.lists(st.tuples(times, prices), min_size=1, max_size=12).map(
    lambda pts: PriceHistory.from_points("p4d.24xlarge", "us-east-1a", [(T0 - 7201, F(1)), *pts])
)


def brute_force(h: PriceHistory, start: int, stop: int) -> F:
    """One second at a time: the price of each second is the last change at or before it."""
    total = F(0)
    for second in range(start, stop):
        in_force = [p for at, p in h.steps if at <= second][-1]
        total += in_force / 3600
    return total


@settings(max_examples=60, deadline=None)
@given(
    h=histories,
    start=st.integers(min_value=T0 - 7200, max_value=T0 + 7200),
    length=st.integers(min_value=0, max_value=4000),
)
def test_integral_equals_per_second_sum(h: PriceHistory, start: int, length: int) -> None:
    exact = h.integral(start, start + length)
    by_second = brute_force(h, start, start + length)
    assert exact == by_second
    assert amounts.to_cents(exact) == amounts.to_cents(by_second)
    assert exact >= 0


endings = st.sampled_from([Ending.USER, Ending.AWS_INTERRUPTION, Ending.LIVE])


@settings(max_examples=60, deadline=None)
@given(
    h=histories,
    start=st.integers(min_value=T0 - 7200, max_value=T0 + 7200),
    length=st.integers(min_value=0, max_value=5000),
    ending=endings,
    gb=st.integers(min_value=8, max_value=2000),
    probe=st.integers(min_value=-100, max_value=6000),
)
def test_bill_matches_rules_and_never_goes_negative(
    h: PriceHistory, start: int, length: int, ending: Ending, gb: int, probe: int
) -> None:
    u = Usage(
        "i-1",
        "p4d.24xlarge",
        "us-east-1",
        "us-east-1a",
        "spot",
        start,
        start + length,
        ending,
        (Volume(gb),),
    )
    b = cost.bill(u, history=h, on_demand_rate=F("32.7726"), storage_price=gb_month_usd)
    if ending is Ending.AWS_INTERRUPTION and length < 3600:
        expected = F(0)
    else:
        expected = brute_force(h, start, start + max(length, 60))
    assert b.compute == expected
    assert b.compute >= 0 and b.storage >= 0 and b.total >= 0
    # accrual is monotone and ends at the total
    at = start + probe
    assert 0 <= b.total_until(at) <= b.total_until(at + 1) <= b.total
    assert b.total_until(b.end) == b.total
