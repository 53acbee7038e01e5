"""`spotrun ls`'s body: the runs as a table or JSON.

Apart from the typer command (spotrun/cli/run_commands.py) so that spotrun/cli/entry.py can
answer a plain `spotrun ls` without importing typer, and printed without rich where
spotrun/cli/plain_table.py can match rich's output exactly.
"""

from __future__ import annotations

import sys

from spotrun.cli.follow_view import fmt_duration, fmt_metrics
from spotrun.cli.library import api
from spotrun.cli.plain_table import plain_table
from spotrun.cli.render import Table, money, out, print_json
from spotrun.core.terminal_text import printable

HEADERS = ("ID", "NAME", "RECIPE", "CLOUD", "STATE", "STARTED", "DURATION", "COST", "METRICS")
NO_RUNS = "no runs yet; start one with `spotrun launch digits-fast`"


def show_runs(all_: bool, as_json: bool) -> None:
    ledger = api.open_ledger()
    runs = ledger.list_runs(include_all=all_)
    rows = [api.run_summary(ledger, r) for r in runs]
    if as_json:
        print_json(rows)
        return
    if not rows:
        sys.stdout.write(NO_RUNS + "\n")
        return
    cells = [
        [
            row["id"],
            row["name"],
            row["recipe"],
            row["cloud"],
            row["state"],
            (row["started"] or row["created"] or "").replace("T", " ").rstrip("Z"),
            fmt_duration(row["duration_s"]),
            money(row["cost_usd"]) if row["cost_usd"] is not None else "?",
            printable(fmt_metrics(row["metrics"])),  # the job wrote these
        ]
        for row in rows
    ]
    text = plain_table(HEADERS, cells, sys.stdout)
    if text is not None:
        sys.stdout.write(text)
        return
    table = Table(box=None, pad_edge=False)
    for col in HEADERS:
        table.add_column(col, no_wrap=col in ("ID", "STATE"))
    for line in cells:
        table.add_row(*line)
    out.print(table)
