"""How the `spotrun sweep` commands print: the list of sweeps, a sweep's state with its
leaderboard (trials ranked by the metric, with cost), best-so-far against dollars spent, PBT's
lineage, and the JSON and CSV forms."""

from __future__ import annotations

import csv
import json
import sys
from typing import TYPE_CHECKING, Any

from spotrun.cli.lazy import stdout_console
from spotrun.core.display_words import metric_word, show_metric_value
from spotrun.core.durations import show_duration
from spotrun.core.lazy import lazy_module
from spotrun.core.money import show_usd

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as RichTable

    from spotrun.service import sweeps as service
    from spotrun.store.sweeps import SweepRecord, SweepStore
    from spotrun.sweep import board
else:  # the service layer and the leaderboard (pydantic, ledger, the bills: ~0.15 s) stay off
    # `sweep run -h` and --help: imported at their first use
    service = lazy_module("spotrun.service.sweeps")
    board = lazy_module("spotrun.sweep.board")

out: Console = stdout_console()  # imported at first use: `spotrun --help` stays fast


def Table(**options: Any) -> RichTable:  # noqa: N802 - stands in for rich's class, imported late
    # late: rich.table (~18 ms) only when a table is drawn
    from rich.table import Table as RichTable

    return RichTable(**options)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def print_csv(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)


def _money(usd: float | None) -> str:
    return "-" if usd is None else show_usd(usd)


def _duration(seconds: float | None) -> str:
    return "-" if seconds is None else show_duration(seconds)


# ------------------------------------------------------------------------- ls
def print_sweeps(rows: list[dict[str, Any]]) -> None:
    """`sweep ls`'s table: one row per sweep, with its trials' counts."""
    if not rows:
        out.print("no sweeps yet; `spotrun sweep RECIPE --grid KEY=V1,V2` starts one")
        return
    table = Table(box=None, pad_edge=False)
    for col in ("ID", "NAME", "RECIPE", "CLOUD", "STATE", "TRIALS", "LIVE", "DONE", "PRUNED"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            str(r["id"]),
            str(r["name"]),
            str(r["recipe"]),
            str(r["cloud"]),
            str(r["state"]),
            str(r["trials"]),
            str(r["live"]),
            str(r["succeeded"]),
            str(r["pruned"]),
        )
    out.print(table)


# --------------------------------------------------------------------- status
def print_status_json(store: SweepStore, sweep: SweepRecord, entries: list[Any]) -> None:
    print_json(
        {
            "id": sweep.id,
            "name": sweep.name,
            "recipe": sweep.recipe,
            "cloud": sweep.cloud,
            "state": sweep.state.value,
            "message": sweep.message,
            "metric": sweep.spec.metric,
            "mode": sweep.spec.mode,
            "early_stop": sweep.spec.early_stop,
            "search": _search_of(sweep.spec),
            "max_cost_usd": sweep.spec.max_cost_usd,
            "plan": sweep.plan,
            "counts": service.counts(store, sweep),
            "leaderboard": board.records(entries, sweep.spec.metric),
            "best_by_spend": [vars(p) for p in board.best_by_spend(entries, sweep.spec.mode)],
        }
    )


def print_status(ledger: Any, sweep: SweepRecord, entries: list[Any]) -> None:
    """The sweep's state and plan, its leaderboard, and best-so-far against dollars spent."""
    out.print(
        f"sweep {sweep.name} ({sweep.id}) {sweep.state.value}: {sweep.message or ''}",
        markup=False,
    )
    if sweep.plan:
        out.print(f"plan: {sweep.plan.get('reason')}", markup=False)
    print_board(ledger, sweep, entries)
    _print_best_by_spend(board.best_by_spend(entries, sweep.spec.mode), sweep.spec)


def _search_of(spec: Any) -> str:
    return str(spec.search or ("random" if spec.random is not None else "grid"))


def _print_best_by_spend(points: list[Any], spec: Any) -> None:
    """Best-so-far against dollars spent: a line where a trial's end improved the best, and
    the last one (what the rest of the money bought)."""
    if not points:
        return
    out.print(
        f"best {spec.metric} so far against dollars spent ({_search_of(spec)} search, "
        f"trials in the order they ended):",
        markup=False,
    )
    for i, point in enumerate(points):
        if point.improved or i == len(points) - 1:
            best = "-" if point.best is None else f"{point.best:.4g}"
            note = "" if point.improved else " (no better since)"
            out.print(
                f"  {_money(point.spent_usd)}: {best} after trial {point.trial}{note}",
                markup=False,
            )


def print_board(ledger: Any, sweep: Any, entries: list[Any] | None = None) -> None:
    """The leaderboard's table; a PBT sweep's copied weights under it."""
    entries = entries if entries is not None else board.leaderboard(ledger, sweep)
    keys: list[str] = []
    for e in entries:
        keys += [k for k in e.trial.params if k not in keys]
    table = Table(box=None, pad_edge=False)
    metric = sweep.spec.metric
    columns = ["RANK", "TRIAL", *[k.upper() for k in keys], metric_word(metric).upper(), "EPOCHS"]
    population = sweep.spec.search == "pbt"
    columns += ["FROM"] if population else []  # whose checkpoint a PBT trial started from
    columns += ["STATUS", "TIME", "COST", "TO TARGET", "COST TO TARGET"]
    for col in columns:
        table.add_column(col)
    for e in entries:
        value = "-" if e.best is None else show_metric_value(metric, e.best)
        table.add_row(
            "-" if e.rank is None else str(e.rank),
            str(e.trial.index),
            *[e.trial.params.get(k, "") for k in keys],
            value,
            str(e.epochs),
            *([_from(e)] if population else []),
            e.status,
            _duration(e.time_s),
            _money(e.cost_usd),
            _duration(e.time_to_target_s),
            _money(e.cost_to_target_usd),
        )
    out.print(table)
    if population:
        _print_lineage(entries)


def _from(entry: Any) -> str:
    if entry.source is None:
        return "-"
    return f"{entry.source} (copied)" if entry.lineage.exploited else entry.source


def _print_lineage(entries: list[Any]) -> None:
    """PBT's exploits: which trial went on from a better one's checkpoint, with which values."""
    copied = sorted((e for e in entries if e.lineage and e.lineage.exploited), key=_trial_index)
    if not copied:
        return
    out.print("population-based training, weights copied:", markup=False)
    for e in copied:
        rec = e.lineage
        changed = [
            f"{k} {rec.params_before.get(k, '-')} -> {v}"
            for k, v in rec.params_after.items()
            if rec.params_before.get(k) != v
        ]
        out.print(
            f"  trial {e.trial.index} (member {rec.member}, generation {rec.generation}) "
            f"from {e.source}, {rec.checkpoint} (step {rec.step}): "
            + (", ".join(changed) or "values unchanged"),
            markup=False,
        )


def _trial_index(entry: Any) -> int:
    return int(entry.trial.index)
