"""The cost report of `spotrun cost` and of a sweep's leaderboard: which runs, each priced again
from the ledger's instances and cached prices (spotrun.cost.bills), grouped into rows
(spotrun.cost.reports). One function for both, so a leaderboard and `spotrun cost --sweep`
always agree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotrun.cloud import get_provider
from spotrun.core.config import Settings
from spotrun.core.errors import NotFoundError, SpotrunError, UsageError
from spotrun.core.metrics_file import read_all
from spotrun.core.rundir import METRICS_FILE
from spotrun.cost import reports
from spotrun.cost.bills import RunBill, bill_run
from spotrun.cost.plot import write_plot
from spotrun.cost.prices import PriceBook, PriceSource, SourceFactory
from spotrun.datasets.record import summary
from spotrun.recipes import Target, get_recipe
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.sweeps import SweepStore

GROUPINGS: tuple[reports.GroupBy, ...] = ("run", "day", "instance-type")


@dataclass(frozen=True)
class CostReport:
    by: reports.GroupBy
    rows: list[reports.Row]
    total: reports.Row
    methods: list[str]  # how the amounts were computed, to state once under the table
    bills: list[RunBill]  # the priced runs, for the plot
    now: float

    @property
    def errors(self) -> list[str]:
        return [f"{r.key}: {r.error}" for r in self.rows if r.error]


def provider_prices(settings: Settings) -> SourceFactory:
    """The price source of each cloud provider that has one (AWS); built on first need."""

    def source(name: str) -> PriceSource | None:
        provider = get_provider(name, settings)
        return provider if isinstance(provider, PriceSource) else None

    return source


def cost_report(
    ledger: Ledger,
    ref: str | None = None,
    *,
    sweep: str | None = None,
    since: float | None = None,
    by: str = "run",
    now: float | None = None,
    sources: SourceFactory | None = None,
) -> CostReport:
    """Cost of one run, a sweep's runs, or every run (created since `since`), grouped `by`.

    Runs are priced again from the ledger's instances and cached prices; price history missing
    from the cache is fetched through `sources` (default: the cloud providers). A run that
    cannot be priced gets a row with its error instead of amounts."""
    if by not in GROUPINGS:
        raise UsageError(f"--by must be one of {', '.join(GROUPINGS)}, got '{by}'")
    if ref is not None and (sweep is not None or since is not None):
        raise UsageError("name one run, or select runs with --sweep/--since, not both")
    now = now if now is not None else time.time()
    if ref is not None:
        runs = [ledger.resolve(ref)]
    else:
        sweep_id = None if sweep is None else _sweep_id(ledger, sweep)
        runs = ledger.list_runs(include_all=True, sweep_id=sweep_id, since=since)
        if sweep is not None and not runs:
            raise NotFoundError(f"no run belongs to sweep '{sweep}'")
    book = PriceBook(ledger, sources if sources is not None else provider_prices(ledger.settings))
    priced = [_priced_run(ledger, run, book, now) for run in runs]
    grouping = by  # narrowed to a GroupBy by the check above
    rows = reports.group(priced, grouping, now)
    bills = [p.bill for p in priced if p.bill is not None]
    methods = sorted({m for b in bills for m in b.methods})
    if grouping == "run" and any(r.target_wanted is not None for r in rows):
        methods.append(reports.TARGET_METHOD)
    return CostReport(grouping, rows, reports.total(rows), methods, bills, now)


def _sweep_id(ledger: Ledger, ref: str) -> str:
    """A sweep's id from its name, id or id prefix, as every sweep command takes it; a ref the
    sweeps table does not know is taken as the id its runs carry."""
    store = SweepStore(ledger)
    try:
        return store.resolve(ref).id
    except NotFoundError:
        if any(s.id.startswith(ref) for s in store.all()):
            raise  # a prefix of several sweep ids
        return ref


def _priced_run(ledger: Ledger, run: RunRecord, book: PriceBook, now: float) -> reports.PricedRun:
    try:
        bill = bill_run(ledger, run, book, now=now)
    except SpotrunError as exc:  # no history, or the cloud refused the price request
        return reports.PricedRun(run, None, error=exc.user_message())
    if run.is_terminal:
        _store_if_changed(ledger, bill)
    target = _target_of(run)
    staged = summary(run.run_dir)
    return reports.PricedRun(
        run,
        bill,
        transitions=ledger.transitions(run.id),
        metrics=read_all(run.run_dir / METRICS_FILE) if target else [],
        target=target,
        staging_spans=staged.spans if staged else (),
    )


def _store_if_changed(ledger: Ledger, bill: RunBill) -> None:
    """A finished run's lines, written again when a recomputation differs (e.g. prices that
    could not be fetched at teardown)."""
    lines = bill.cost_lines()
    stored = ledger.cost_lines(bill.run.id)
    if [(s.kind, s.amount) for s in stored] != [(n.kind, n.amount) for n in lines]:
        ledger.replace_cost_lines(bill.run.id, lines)


def _target_of(run: RunRecord) -> Target | None:
    if run.spec.job is not None:
        return None  # your own command: no recipe, no target
    try:
        return get_recipe(run.spec.recipe, run.spec.overrides).target
    except SpotrunError:
        return None  # a recipe since removed or changed: no target to measure against


def cost_rows(ledger: Ledger, ref: str | None = None, **options: Any) -> list[dict[str, Any]]:
    """The report's rows as plain dicts (what `spotrun cost --json` prints)."""
    report = cost_report(ledger, ref, **options)
    return [reports.to_record(row, report.by) for row in report.rows]


def write_cost_plot(report: CostReport, path: Path) -> None:
    write_plot(path, report.bills)
