"""Budget arithmetic: the moment to start stopping, from constructed histories and spend."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spotrun.cloud.base import Offer
from spotrun.control.budget_guard import check_affordable
from spotrun.core.errors import UsageError
from spotrun.cost import budget
from spotrun.cost import rules as cost
from spotrun.cost.budget import Action, LiveInstance, StopMargin
from spotrun.cost.ebs_prices import gb_month_usd
from spotrun.cost.price_history import PriceHistory
from spotrun.cost.rules import Ending, Usage

T0 = 1_741_597_200  # 2025-03-10 09:00:00 UTC
MARGIN = StopMargin(checkpoint_s=30, sync_s=60, terminate_s=30)  # 120 s


def spent_so_far(history: PriceHistory, start: int, now: int) -> F:
    u = Usage("i-1", "g5.xlarge", "us-east-1", "us-east-1a", "spot", start, now, Ending.LIVE)
    return cost.bill(u, history=history, on_demand_rate=None, storage_price=gb_month_usd).total


def test_constant_price_stops_exactly_in_time() -> None:
    # $3.60/h is $0.001 a second; $1 spent; cap $2: 1,000 s left, stopping takes 120 s
    v = budget.decide(T0, F(1), F(2), [LiveInstance(T0 - 5000, F("3.6"))], MARGIN)
    assert v.action is Action.CONTINUE
    assert v.stop_at == T0 + 880 and v.seconds_left == 880
    assert v.projected_usd == F(2)
    # durations for people (issue 34): not "in 1000 s"
    assert (
        v.reason
        == "at today's prices the cap is reached in 16m40s; stopping starts 2m00s before that"
    )


def test_history_with_a_price_rise_brings_the_stop_forward() -> None:
    start = T0 - 3600
    history = PriceHistory.from_points(
        "g5.xlarge", "us-east-1a", [(start - 10, "0.40"), (start + 1800, "1.20")]
    )
    spent = spent_so_far(history, start, T0)
    assert spent == F("0.20") + F("0.60")
    price_now = history.price_at(T0)
    v = budget.decide(T0, spent, F("1.50"), [LiveInstance(start, price_now)], MARGIN)
    # $0.70 left at $1.20/h = 2,100 s, less the 120 s margin
    assert v.stop_at == T0 + 2100 - 120
    old_price = budget.decide(T0, spent, F("1.50"), [LiveInstance(start, F("0.40"))], MARGIN)
    assert old_price.stop_at is not None and old_price.stop_at > v.stop_at


def test_young_instance_has_paid_its_first_minute_already() -> None:
    # started 20 s ago: the spend so far holds its first 60 s; 40 s more are free of charge
    inst = LiveInstance(T0 - 20, F("36"))  # $0.01 a second
    spent = F("0.60")
    v = budget.decide(T0, spent, F("1.00"), [inst], StopMargin(0, 0, 0))
    assert v.stop_at == T0 + 40 + 40
    assert budget.spend_at(T0 + 40, T0, spent, [inst]) == spent


def test_several_instances_and_storage() -> None:
    instances = [
        LiveInstance(T0 - 7200, F("3.6"), storage_usd_per_hour=F("0.36")),
        LiveInstance(T0 - 100, F("7.2")),
    ]
    # rate: 0.001 + 0.0001 + 0.002 = 0.0031 $/s; $3.10 left -> 1,000 s
    v = budget.decide(T0, F(10), F("13.10"), instances, MARGIN)
    assert v.stop_at == T0 + 1000 - 120


def test_over_or_too_close_means_stop_now() -> None:
    inst = [LiveInstance(T0 - 5000, F("3.6"))]
    over = budget.decide(T0, F("2.5"), F(2), inst, MARGIN)
    assert over.action is Action.STOP_NOW and over.stop_at == T0 and over.seconds_left == 0
    close = budget.decide(T0, F("1.95"), F(2), inst, MARGIN)  # 50 s left, stopping takes 120
    assert close.action is Action.STOP_NOW
    assert close.projected_usd == F("1.95") + F("0.12")


def test_nothing_billing_never_reaches_the_cap() -> None:
    v = budget.decide(T0, F(1), F(2), [LiveInstance(T0 - 500, F(0))], MARGIN)
    assert v.action is Action.CONTINUE and v.stop_at is None
    assert budget.decide(T0, F(1), F(2), [], MARGIN).stop_at is None


def test_fractional_now_rounds_down() -> None:
    v = budget.decide(T0 + 0.9, F(1), F(2), [LiveInstance(T0 - 5000, F("3.6"))], MARGIN)
    assert v.stop_at == T0 + 880


@settings(max_examples=80, deadline=None)
@given(
    spent_cents=st.integers(0, 5000),
    room_cents=st.integers(0, 5000),
    fleet=st.lists(
        st.tuples(st.integers(0, 4000), st.integers(0, 40_000_000), st.integers(0, 100_000)),
        min_size=1,
        max_size=4,
    ),
    margin_s=st.integers(0, 600),
)
def test_stop_at_is_the_last_safe_second(
    spent_cents: int, room_cents: int, fleet: list[tuple[int, int, int]], margin_s: int
) -> None:
    instances = [
        LiveInstance(T0 - age, F(micro, 10**6), F(storage_micro, 10**6))
        for age, micro, storage_micro in fleet
    ]
    spent, cap = F(spent_cents, 100), F(spent_cents + room_cents, 100)
    margin = StopMargin(0, margin_s, 0)
    v = budget.decide(T0, spent, cap, instances, margin)

    def ends_within(at: int) -> bool:
        return budget.spend_at(at + margin.total_s, T0, spent, instances) <= cap

    if v.stop_at is None:
        assert all(i.usd_per_hour == 0 and i.storage_usd_per_hour == 0 for i in instances)
    elif v.action is Action.STOP_NOW:
        assert not ends_within(T0 + 1)
    else:
        assert ends_within(v.stop_at) and not ends_within(v.stop_at + 1)
        assert v.projected_usd <= cap


def test_a_cap_the_first_minute_and_a_stop_would_pass_is_refused() -> None:
    offer = Offer("aws", "g5.xlarge", "us-east-1", "us-east-1a", 1, "A10G", 24.0, 4, 16.0, 3.6, 9.0)
    # $3.60/h = $0.001/s; two nodes for 60 s + 120 s to stop: $0.36
    check_affordable(0.36, offer, nodes=2, margin_s=120)
    with pytest.raises(UsageError, match=r"2 x g5.xlarge .* for 3m00s .* is \$0.36"):
        check_affordable(0.35, offer, nodes=2, margin_s=120)
