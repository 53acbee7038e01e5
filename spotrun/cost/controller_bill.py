"""What `controller up --on aws`'s instance has cost: its running spans at the on-demand list
price (EC2 bills compute only while an instance runs, per second, at least a minute per start)
and its gp3 root volume for the whole time since `up` (a stopped instance's volume still
bills). Pure: the caller hands in the times (SPOTRUN_HOME/remote.json) and prices."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from spotrun.core.errors import PricingError
from spotrun.cost.amounts import HOUR_S, usd
from spotrun.cost.ebs_prices import gb_month_usd
from spotrun.cost.rules import MINIMUM_BILLED_S, gb_months

VOLUME_TYPE = "gp3"


@dataclass(frozen=True)
class ControllerBill:
    up_s: float  # since `controller up`
    running_s: float  # of which running (the rest stopped)
    compute_usd: Fraction | None  # None: no on-demand price known
    storage_usd: Fraction | None  # None: no EBS price for the region
    disk_gb: int

    @property
    def stopped_s(self) -> float:
        return self.up_s - self.running_s

    @property
    def total_usd(self) -> Fraction | None:
        if self.compute_usd is None or self.storage_usd is None:
            return None
        return self.compute_usd + self.storage_usd


def running_spans(
    since: float, now: float, stopped: Sequence[Sequence[float | None]]
) -> list[tuple[float, float]]:
    """[since, now] less the stopped spans ([stopped at, started at]; an open one, None or
    a single time, lasts until now)."""
    cuts = sorted(
        (max(since, float(span[0] or since)), min(now, float(_end(span, now))))
        for span in stopped
        if span
    )
    spans: list[tuple[float, float]] = []
    at = since
    for start, end in cuts:
        if end <= start:
            continue
        if start > at:
            spans.append((at, start))
        at = max(at, end)
    if now > at:
        spans.append((at, now))
    return spans


def _end(span: Sequence[float | None], now: float) -> float:
    return now if len(span) < 2 or span[1] is None else float(span[1])


def controller_bill(
    *,
    since: float,
    now: float,
    stopped: Sequence[Sequence[float | None]],
    usd_per_hour: float | None,
    region: str,
    disk_gb: int,
) -> ControllerBill:
    spans = running_spans(since, now, stopped)
    running = sum(end - start for start, end in spans)
    compute = None
    if usd_per_hour:
        billed = sum(max(int(end - start), MINIMUM_BILLED_S) for start, end in spans)
        compute = usd(usd_per_hour) * billed / HOUR_S
    try:
        per_gb_month = gb_month_usd(region, VOLUME_TYPE)
    except PricingError:
        storage = None
    else:
        end = max(int(now), int(since) + MINIMUM_BILLED_S)
        storage = per_gb_month * disk_gb * gb_months(int(since), end)
    return ControllerBill(max(0.0, now - since), running, compute, storage, disk_gb)
