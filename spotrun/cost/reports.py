"""Cost report rows: per run, per UTC day or per instance type, from priced runs.

Pure: it takes RunBills (spotrun.cost.bills) with each run's state history and metrics, and
returns rows of exact amounts; JSON and CSV keep them unrounded, a table shows them by
spotrun/core/money.py's rule.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

from spotrun.core.money import exact_usd
from spotrun.core.runstates import RunState
from spotrun.cost.bills import RunBill
from spotrun.cost.rules import Bill
from spotrun.recipes.base import Target
from spotrun.store.ledger import RunRecord, Transition

GroupBy = Literal["run", "day", "instance-type"]
DAY_S = 86_400

TARGET_METHOD = (
    "to target: the first evaluation at or past the recipe's target (DAWNBench's measure); "
    "its training seconds laid over the run's running periods give the moment, and the cost "
    "is everything billed up to that moment"
)


@dataclass(frozen=True)
class Amounts:
    instance_s: int = 0  # seconds instances ran (not billed seconds)
    compute: Fraction = Fraction(0)
    storage: Fraction = Fraction(0)
    on_demand: Fraction | None = Fraction(0)  # the same work on demand, same storage
    # compute billed at the on-demand price (--spot-policy on-demand, or auto's fallback)
    on_demand_market: Fraction = Fraction(0)
    markets: frozenset[str] = frozenset()  # the markets its instances were bought in
    transfer: Fraction = Fraction(0)  # bytes read from S3 in another region
    transfer_bytes: int = 0

    @property
    def total(self) -> Fraction:
        return self.compute + self.storage + self.transfer

    @property
    def saving_pct(self) -> Fraction | None:
        if not self.on_demand:
            return None
        return 100 * (1 - self.total / self.on_demand)

    def __add__(self, other: Amounts) -> Amounts:
        on_demand = (
            None
            if self.on_demand is None or other.on_demand is None
            else self.on_demand + other.on_demand
        )
        return Amounts(
            self.instance_s + other.instance_s,
            self.compute + other.compute,
            self.storage + other.storage,
            on_demand,
            self.on_demand_market + other.on_demand_market,
            self.markets | other.markets,
            self.transfer + other.transfer,
            self.transfer_bytes + other.transfer_bytes,
        )


@dataclass(frozen=True)
class TargetReach:
    metric: str
    value: float
    step: int
    train_s: float  # the trainer's own clock at that evaluation
    wall_s: float  # since the job first started, interruptions included
    usd: Fraction  # billed up to that moment


@dataclass(frozen=True)
class Row:
    key: str  # run name, UTC day (YYYY-MM-DD) or instance type
    amounts: Amounts
    run: RunRecord | None = None
    live: bool = False
    target: TargetReach | None = None
    target_wanted: Target | None = None
    error: str | None = None
    methods: tuple[str, ...] = ()
    staging: StagingCost | None = None


@dataclass(frozen=True)
class PricedRun:
    """One run's inputs to a report: its bill (or why it has none), states and metrics."""

    run: RunRecord
    bill: RunBill | None
    transitions: list[Transition] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    target: Target | None = None
    error: str | None = None
    # (start, end) of each staging of remote data onto its instances (spotrun.datasets.record)
    staging_spans: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class StagingCost:
    seconds: float
    usd: Fraction  # what the run's instances cost while they staged data


def staging_cost(p: PricedRun) -> StagingCost | None:
    """The run's bill over the spans it spent staging data (None: it staged nothing)."""
    if not p.staging_spans or p.bill is None:
        return None
    usd = Fraction(0)
    for start, end in p.staging_spans:
        lo, hi = int(start), int(end) + (0 if end == int(end) else 1)
        usd += sum((b.total_until(hi) - b.total_until(lo) for b in p.bill.bills), Fraction(0))
    return StagingCost(sum(end - start for start, end in p.staging_spans), usd)


# ------------------------------------------------------------------ pieces
def bill_amounts(bill: Bill, start: int | None = None, stop: int | None = None) -> Amounts:
    """A bill's amounts, whole or accrued within [start, stop)."""
    market = bill.usage.market
    on_demand = market == "on-demand"
    if start is None or stop is None:
        compute = bill.compute
        return Amounts(
            bill.usage.runtime_s,
            compute,
            bill.storage,
            bill.on_demand_total,
            compute if on_demand else Fraction(0),
            frozenset({market}),
            bill.transfer,
            bill.transfer_bytes,
        )
    a, b = bill.on_demand_until(start), bill.on_demand_until(stop)
    crossed = [t for t in bill.usage.transfers if start <= t.at < stop]
    transfer = bill.transfer_until(stop) - bill.transfer_until(start)
    ran = max(0, min(stop, bill.usage.end) - max(start, bill.usage.start))
    compute = bill.compute_until(stop) - bill.compute_until(start)
    return Amounts(
        ran,
        compute,
        bill.storage_until(stop) - bill.storage_until(start),
        None
        if a is None or b is None
        else b - a + bill.storage_until(stop) - bill.storage_until(start) + transfer,
        compute if on_demand else Fraction(0),
        frozenset({market}),
        transfer,
        sum(t.size_bytes for t in crossed),
    )


def _sum(amounts: Iterable[Amounts]) -> Amounts:
    total = Amounts()
    for a in amounts:
        total = total + a
    return total


def running_periods(transitions: list[Transition], now: float) -> list[tuple[float, float]]:
    periods = []
    for i, t in enumerate(transitions):
        if t.to_state is RunState.RUNNING:
            end = transitions[i + 1].at if i + 1 < len(transitions) else now
            periods.append((t.at, end))
    return periods


def moment_of(train_s: float, periods: list[tuple[float, float]]) -> float | None:
    """The wall-clock moment at which the job had trained `train_s` seconds."""
    if not periods:
        return None
    left = train_s
    for a, b in periods:
        if left <= b - a:
            return a + left
        left -= b - a
    return periods[-1][1]  # the trainer's clock ran past the recorded periods: their end


def reach_target(priced: PricedRun, now: float) -> TargetReach | None:
    target, bill = priced.target, priced.bill
    if target is None or bill is None:
        return None
    for line in priced.metrics:
        if not target.reached(line):
            continue
        train_s = float(line.get("elapsed_s", 0.0))
        periods = running_periods(priced.transitions, now)
        moment = moment_of(train_s, periods)
        if moment is None:
            return None
        return TargetReach(
            metric=target.metric,
            value=float(line[target.metric]),
            step=int(line.get("step", 0)),
            train_s=train_s,
            wall_s=moment - periods[0][0],
            usd=bill.total_until(int(moment)),
        )
    return None


# ------------------------------------------------------------------ groupings
def by_run(priced: list[PricedRun], now: float) -> list[Row]:
    rows = []
    for p in priced:
        if p.bill is None:
            rows.append(Row(p.run.name, Amounts(), run=p.run, error=p.error))
            continue
        rows.append(
            Row(
                p.run.name,
                _sum(bill_amounts(b) for b in p.bill.bills),
                run=p.run,
                live=p.bill.live,
                target=reach_target(p, now),
                target_wanted=p.target,
                methods=tuple(p.bill.methods),
                staging=staging_cost(p),
            )
        )
    return rows


def by_day(priced: list[PricedRun]) -> list[Row]:
    days: dict[str, Amounts] = {}
    for p in priced:
        for b in p.bill.bills if p.bill else ():
            first = b.usage.start - b.usage.start % DAY_S
            for day_start in range(first, max(b.end, b.usage.start + 1), DAY_S):
                key = time.strftime("%Y-%m-%d", time.gmtime(day_start))
                part = bill_amounts(b, day_start, day_start + DAY_S)
                days[key] = days.get(key, Amounts()) + part
    return [Row(day, days[day]) for day in sorted(days)]


def by_instance_type(priced: list[PricedRun]) -> list[Row]:
    types: dict[str, Amounts] = {}
    for p in priced:
        for b in p.bill.bills if p.bill else ():
            key = b.usage.instance_type
            types[key] = types.get(key, Amounts()) + bill_amounts(b)
    return [Row(key, types[key]) for key in sorted(types)]


def group(priced: list[PricedRun], by: GroupBy, now: float) -> list[Row]:
    if by == "run":
        return by_run(priced, now)
    if by == "day":
        return by_day(priced)
    return by_instance_type(priced)


def total(rows: list[Row]) -> Row:
    return Row("total", _sum(r.amounts for r in rows if r.error is None))


# ------------------------------------------------------------------ rendering
def percent(value: Fraction | None) -> Decimal | None:
    if value is None:
        return None
    return Decimal(round(value * 10)).scaleb(-1)


def to_record(row: Row, by: GroupBy) -> dict[str, Any]:
    """One row for --json and --csv: amounts in unrounded USD (spotrun/core/money.py)."""
    a = row.amounts
    record: dict[str, Any] = {by.replace("-", "_"): row.key}
    if row.run is not None:
        record.update(
            id=row.run.id,
            name=row.run.name,
            cloud=row.run.cloud,
            state=row.run.state.value,
            sweep_id=row.run.sweep_id,
            live=row.live,
        )
    record.update(
        instance_seconds=a.instance_s,
        instance_hours=round(a.instance_s / 3600, 4),
        market=market_word(a.markets),
        spot_usd=exact_usd(a.compute),
        on_demand_market_usd=exact_usd(a.on_demand_market),
        storage_usd=exact_usd(a.storage),
        transfer_bytes=a.transfer_bytes,
        transfer_usd=exact_usd(a.transfer),
        cost_usd=exact_usd(a.total),
        on_demand_usd=exact_usd(a.on_demand),
        saving_pct=_num(percent(a.saving_pct)),
    )
    if by == "run":
        reach = row.target
        wanted = row.target_wanted
        record.update(
            target=None if wanted is None else f"{wanted.metric} {wanted.mode} {wanted.value}",
            time_to_target_s=None if reach is None else round(reach.wall_s, 1),
            train_s_to_target=None if reach is None else reach.train_s,
            cost_to_target_usd=None if reach is None else exact_usd(reach.usd),
        )
        staged = row.staging
        record.update(
            staging_s=None if staged is None else round(staged.seconds, 1),
            staging_usd=None if staged is None else exact_usd(staged.usd),
        )
        record.update(method=list(row.methods), error=row.error)
    return record


def market_word(markets: frozenset[str]) -> str:
    """Which market a row's instances were bought in: spot, on-demand, or both (spot first)."""
    order = ("spot", "on-demand", "local")
    return "+".join(m for m in order if m in markets) or "-"


def _num(value: Decimal | None) -> float | None:
    return None if value is None else float(value)
