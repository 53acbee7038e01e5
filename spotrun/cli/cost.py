"""`spotrun cost`: what runs cost, as AWS bills it, as a table, JSON, CSV or a plot."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from spotrun.cli.common import print_error
from spotrun.cli.complete import complete_run, complete_sweep
from spotrun.cli.follow_view import fmt_duration
from spotrun.cli.library import api
from spotrun.cli.render import Table, err, money, out, print_csv, print_json
from spotrun.core.errors import UsageError
from spotrun.core.exitcodes import FAILURE
from spotrun.core.lazy import lazy_module
from spotrun.cost.amounts import format_usd

if TYPE_CHECKING:
    from spotrun.cost import plot as cost_plot
    from spotrun.cost import reports
else:  # pydantic and the ledger (~0.16 s) stay off `cost -h`
    cost_plot = lazy_module("spotrun.cost.plot")
    reports = lazy_module("spotrun.cost.reports")


class GroupBy(str, Enum):
    run = "run"
    day = "day"
    instance_type = "instance-type"


def cost(
    run: str | None = typer.Argument(
        None, help="one run; default every run", autocompletion=complete_run
    ),
    sweep: str | None = typer.Option(
        None,
        "--sweep",
        help="only the runs of this sweep (name or id prefix)",
        autocompletion=complete_sweep,
    ),
    since: str | None = typer.Option(
        None, "--since", metavar="DATE", help="only runs created since (UTC date or date-time)"
    ),
    by: GroupBy = typer.Option(GroupBy.run, "--by", help="one row per run, UTC day or type"),
    as_json: bool = typer.Option(False, "--json", help="the rows as JSON"),
    as_csv: bool = typer.Option(False, "--csv", help="the rows as CSV"),
    plot: Path | None = typer.Option(
        None, "--plot", metavar="FILE.png", help="also draw cumulative cost over time per run"
    ),
) -> None:
    """What runs cost, as AWS bills it: instance-hours, spot and on-demand USD, saving.

    \b
    Examples:
      spotrun cost
      spotrun cost RUN
      spotrun cost --sweep SWEEP --by instance-type
      spotrun cost --since 2026-12-01 --csv
    """
    if as_json and as_csv:
        raise UsageError("--json and --csv each print the rows; choose one")
    if plot is not None:
        cost_plot.check_plot_path(plot)
    ledger = api.open_ledger()
    report = api.cost_report(
        ledger,
        run,
        sweep=sweep,
        since=api.parse_since(since) if since is not None else None,
        by=by.value,
    )
    if plot is not None:
        api.write_cost_plot(report, plot)
        err.print(f"wrote {plot}")
    records = [reports.to_record(row, report.by) for row in report.rows]
    if as_json:
        print_json(records)
    elif as_csv:
        print_csv(records)
    else:
        _print_cost_table(report, records)
    for problem in report.errors:
        print_error(f"cannot price {problem}")
    if report.errors:
        raise typer.Exit(FAILURE)


def _print_cost_table(report: api.CostReport, records: list[dict[str, Any]]) -> None:
    if not records:
        out.print("no runs to report")
        return
    by_run = report.by == "run"
    table = Table(box=None, pad_edge=False)
    head = {"run": "RUN", "day": "DAY (UTC)", "instance-type": "INSTANCE TYPE"}[report.by]
    columns = [head] + (["STATE"] if by_run else [])
    columns += ["INSTANCE-H", "SPOT", "EBS", "TOTAL", "ON-DEMAND", "SAVING"]
    if by_run:
        columns += ["TO TARGET", "COST TO TARGET"]
    for col in columns:
        table.add_column(col, justify="left" if col in (head, "STATE") else "right")
    rows: list[tuple[reports.Row, dict[str, Any]]] = list(zip(report.rows, records))
    if len(rows) > 1:
        rows.append((report.total, reports.to_record(report.total, report.by)))
    for row, rec in rows:
        if row.error:
            cells = [row.key, rec.get("state", ""), "?", "?", "?", "?", "?", "?", "", ""]
            table.add_row(*cells[: len(columns)])
            continue
        saving = rec["saving_pct"]
        cells = [row.key + ("*" if row.live else "")]
        if by_run:
            cells.append(rec.get("state") or "")
        cells += [
            f"{rec['instance_hours']:.2f}",
            money(rec["spot_usd"]),
            money(rec["storage_usd"]),
            money(rec["cost_usd"]),
            money(rec["on_demand_usd"]),
            "-" if saving is None else f"{saving:.1f}%",
        ]
        if by_run:
            cells += _target_cells(row)
        table.add_row(*cells)
    out.print(table)
    out.print(
        "amounts in USD, to the cent (under a cent: two significant digits); totals are summed "
        "exactly, and --json and --csv keep every amount unrounded"
    )
    for rec in records:
        if rec.get("staging_s") is not None:
            out.print(
                f"staging {rec['run']}: {fmt_duration(rec['staging_s'])} of instance time while "
                f"its data was staged, {money(rec['staging_usd'])} of its cost"
            )
        if rec.get("transfer_bytes"):
            out.print(
                f"transfer {rec.get('run', rec.get('day', rec.get('instance_type')))}: "
                f"{rec['transfer_bytes']} bytes read across regions, {money(rec['transfer_usd'])}"
            )
    if any(row.live for row in report.rows):
        out.print("* still running: priced up to now")
    for method in report.methods:
        out.print(f"method: {method}")


def _target_cells(row: Any) -> list[str]:
    if row.run is None:
        return ["", ""]
    if row.target is not None:
        return [fmt_duration(row.target.wall_s), format_usd(row.target.usd)]
    if row.target_wanted is not None:
        return ["not reached", "-"]
    return ["-", "-"]
