"""Which ends the free first hour covers: AWS's "Billing for interrupted Spot Instances" says
an instance EC2 interrupts in its first hour is not charged (Linux), whatever EC2 does to it
(terminate, stop, hibernate); one the user stops or terminates pays its seconds."""

from __future__ import annotations

from fractions import Fraction

from spotlab.prices import utc
from spotrun.cost import rules as cost
from spotrun.cost.ebs_prices import gb_month_usd
from spotrun.cost.price_history import PriceHistory
from spotrun.cost.rules import Ending, Usage

T0 = utc("2025-03-10 09:00:00")
# How spotrun records an instance EC2 stopped (or hibernated) and spotrun then terminated
# (spotrun.control.run_instances.end_stopped), and one EC2 terminated.
STOPPED_BY_EC2 = "Server.SpotInstanceShutdown: Spot instance shutdown; terminated"
HIBERNATED_BY_EC2 = "Server.SpotInstanceShutdown: Spot instance hibernation; terminated"
TERMINATED_BY_EC2 = "Server.SpotInstanceTermination: Spot instance termination"


def _bill(end_reason: str, runtime_s: int) -> cost.Bill:
    usage = Usage(
        instance_id="i-1",
        instance_type="g5.xlarge",
        region="us-east-1",
        zone="us-east-1a",
        market="spot",
        start=T0,
        end=T0 + runtime_s,
        ending=cost.ending_of(end_reason, ended=True),
    )
    history = PriceHistory.from_points("g5.xlarge", "us-east-1a", [(T0 - 100, "0.40")])
    return cost.bill(
        usage, history=history, on_demand_rate=Fraction("1.006"), storage_price=gb_month_usd
    )


def test_ec2_stop_or_hibernation_is_an_interruption() -> None:
    for reason in (STOPPED_BY_EC2, HIBERNATED_BY_EC2, TERMINATED_BY_EC2):
        assert cost.ending_of(reason, ended=True) is Ending.AWS_INTERRUPTION, reason
        assert _bill(reason, 1800).compute == 0, reason  # in its first hour: free
        assert _bill(reason, 5400).compute == Fraction("0.60"), reason  # after it: every second


def test_an_end_by_the_user_or_spotrun_pays_its_seconds() -> None:
    for reason in ("stopped by the user", "spot interruption notice", "User initiated"):
        assert cost.ending_of(reason, ended=True) is Ending.USER
        assert _bill(reason, 1800).compute == Fraction("0.20")
