"""Print the worked cost example of docs/cost.md, every number computed by spotrun.cost.rules.

    python scripts/cost_example.py

tests/unit/cost/test_cost_readme.py checks that docs/cost.md holds exactly this text.
"""

from __future__ import annotations

import calendar
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spotrun.cost import amounts
from spotrun.cost import rules as cost  # noqa: E402
from spotrun.cost.ebs_prices import gb_month_usd  # noqa: E402
from spotrun.cost.price_history import PriceHistory

TYPE, REGION, ZONE = "g5.xlarge", "us-east-1", "us-east-1a"
ON_DEMAND = Fraction("1.006")  # g5.xlarge on demand, Linux, us-east-1, USD/h
ROOT_GB = 200


def utc(clock: str) -> int:
    return calendar.timegm(time.strptime(f"2025-03-10 {clock}", "%Y-%m-%d %H:%M:%S"))


START = utc("09:00:00")
HISTORY = PriceHistory.from_points(
    TYPE,
    ZONE,
    [(START - 3 * 86400, "0.40"), (utc("09:37:12"), "0.52"), (utc("10:15:00"), "0.37")],
)


def bill(end: int, ending: cost.Ending) -> cost.Bill:
    usage = cost.Usage(
        "i-0example", TYPE, REGION, ZONE, "spot", START, end, ending, (cost.Volume(ROOT_GB),)
    )
    return cost.bill(usage, history=HISTORY, on_demand_rate=ON_DEMAND, storage_price=gb_month_usd)


def hms(at: int) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(at))


def dec(amount: Fraction, places: int = 6) -> str:
    return f"{float(amount):.{places}f}"


def example() -> str:
    full = bill(utc("11:05:30"), cost.Ending.USER)
    hours = Fraction(full.usage.runtime_s, 3600)
    lines = [
        f"A {TYPE} spot instance in {ZONE} with a {ROOT_GB} GB gp3 root volume, launched at "
        f"{hms(START)} UTC on 2025-03-10 and terminated by its user at {hms(full.usage.end)} "
        f"({full.usage.runtime_s:,} s). The spot price history of its type in its zone: "
        f"${dec(HISTORY.price_at(START), 4)}/h in force since three days before, then "
        + ", then ".join(f"${dec(p, 4)} from {hms(at)}" for at, p in HISTORY.steps[1:])
        + ".",
        "",
        "| from | to | seconds | USD/hour | USD |",
        "|---|---|--:|--:|--:|",
    ]
    for a, z, price in HISTORY.segments(START, full.billed_stop):
        lines.append(
            f"| {hms(a)} | {hms(z)} | {z - a:,} | {dec(price, 4)} | {dec((z - a) * price / 3600)} |"
        )
    (volume,) = full.volumes
    lines += [
        f"| compute | | {full.billed_s:,} | | {dec(full.compute)} |",
        f"| EBS: {ROOT_GB} GB x $0.08/GB-month x {full.usage.runtime_s:,} s of March's "
        f"31 days | | | | {dec(full.storage)} |",
        f"| **billed** | | | | **{amounts.format_usd(full.total)}** |",
        "",
        f"For the same history, one catalog price x duration ({dec(hours, 4)} h) says, for the "
        "compute alone:",
        "",
        "| method | compute USD |",
        "|---|--:|",
        f"| spotrun: each second at the price in force | {amounts.format_usd(full.compute)} |",
        f"| the price at launch x duration | "
        f"{amounts.format_usd(cost.catalog_estimate(HISTORY.price_at(START), full.usage))} |",
        f"| the price at the end x duration | "
        f"{amounts.format_usd(cost.catalog_estimate(HISTORY.price_at(full.usage.end), full.usage))} |",  # noqa: E501
        f"| on demand (${dec(ON_DEMAND, 3)}/h) | {amounts.format_usd(full.on_demand or 0)} |",
        "",
    ]
    cut = bill(utc("09:52:00"), cost.Ending.AWS_INTERRUPTION)
    short = bill(utc("09:00:25"), cost.Ending.USER)
    lines += [
        f"Had AWS interrupted it at {hms(cut.usage.end)}, within its first hour, the compute "
        f"would cost nothing and the bill would be its EBS alone, {amounts.format_usd(cut.total)}; "
        f"the price at launch x duration says {amounts.format_usd(cost.catalog_estimate(HISTORY.price_at(START), cut.usage))}. "  # noqa: E501
        f"Had its user terminated it after {short.usage.runtime_s} s, it would be billed "
        f"{short.billed_s} s: {dec(short.compute)} USD of compute where {short.usage.runtime_s} s "
        f"x the price says {dec(cost.catalog_estimate(HISTORY.price_at(START), short.usage))}.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(example())
