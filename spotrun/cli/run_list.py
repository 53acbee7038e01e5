"""`spotrun ls`'s body: the runs as a table or JSON.

Apart from the typer command (spotrun/cli/run_commands.py) so that spotrun/cli/entry.py can
answer a plain `spotrun ls` without importing typer, and printed without rich where
spotrun/cli/plain_table.py can match rich's output exactly.
"""

from __future__ import annotations

import math
import sys

from spotrun.cli.follow_view import fmt_duration, fmt_metrics
from spotrun.cli.library import api
from spotrun.cli.plain_table import plain_table
from spotrun.cli.recent import RECENT_S, recent
from spotrun.cli.render import Table, money, out, print_json
from spotrun.core.capacity_note import is_waiting_note, show_note
from spotrun.core.display_words import shown_state
from spotrun.core.errors import LedgerWriteError
from spotrun.core.home import default_home
from spotrun.core.runstates import RunState
from spotrun.core.terminal_text import printable
from spotrun.store.adopt import adopt_run_folders
from spotrun.store.connection import home_write_fault
from spotrun.store.ledger import Ledger
from spotrun.store.trial_marks import pruned_runs

HEADERS = ("ID", "NAME", "RECIPE", "CLOUD", "STATE", "STARTED", "DURATION", "COST", "METRICS")
NO_RUNS = "no runs yet; start one with `spotrun launch digits-fast`"


def _note(message: str) -> None:
    sys.stderr.write(f"note: {message}\n")


def _ledger() -> Ledger:
    """The ledger, its live runs driven and the run folders it lost adopted back; a ledger
    that cannot be written now is still listed."""
    try:
        ledger = api.open_ledger()
    except LedgerWriteError:  # said by the note on live runs
        return api.open_ledger(reconcile=False)
    try:
        adopted = adopt_run_folders(ledger)
    except LedgerWriteError as exc:
        _note(f"run folders the ledger does not know were not adopted: {exc.user_message()}")
        return ledger
    for run in adopted:
        _note(
            f"run {run.run_id} was in its folder but not in the ledger (a damaged ledger?): "
            f"adopted back as {run.state.value}"
        )
    if any(run.state is RunState.RUNNING for run in adopted):
        ledger.close()
        ledger = api.open_ledger()  # its controller started, to drive it again
    return ledger


def show_runs(all_: bool, as_json: bool, since_s: float = RECENT_S) -> None:
    """The runs: every live one and those ended in the last `since_s` (all with `all_`)."""
    fault = home_write_fault(default_home().absolute())  # before the ledger is open
    ledger = _ledger()
    window = recent(ledger.list_runs(include_all=True), math.inf if all_ else since_s)
    runs = window.shown
    footer = window.footer(since_s)
    if fault is not None and any(not r.is_terminal for r in runs):
        _note(f"{fault}: live runs wait until it can be written")  # why nothing moves
    rows = [api.run_summary(ledger, r) for r in runs]
    pruned = pruned_runs(ledger, [row["id"] for row in rows if row["sweep_id"]])
    for row in rows:
        row["waiting_for_capacity"] = waiting_line(row["message"])
    if as_json:
        print_json(rows)
        return
    if not rows:
        sys.stdout.write((footer or NO_RUNS) + "\n")
        return
    cells = [
        [
            row["id"],
            row["name"],
            row["recipe"],
            row["cloud"],
            shown_state(row["state"], pruned=row["id"] in pruned),
            (row["started"] or row["created"] or "").replace("T", " ").rstrip("Z"),
            fmt_duration(row["duration_s"]),
            money(row["cost_usd"]) if row["cost_usd"] is not None else "?",
            printable(fmt_metrics(row["metrics"])),  # the job wrote these
        ]
        for row in rows
    ]
    notes = "".join(
        f"{row['name']}: {printable(row['waiting_for_capacity'])}\n"
        for row in rows
        if row["waiting_for_capacity"]
    )
    notes += f"{footer}\n" if footer else ""  # what the window left out, last
    text = plain_table(HEADERS, cells, sys.stdout)
    if text is not None:
        sys.stdout.write(text + notes)
        return
    table = Table(box=None, pad_edge=False)
    for col in HEADERS:
        table.add_column(col, no_wrap=col in ("ID", "STATE"))
    for line in cells:
        table.add_row(*line)
    out.print(table)
    if notes:
        out.print(notes.rstrip("\n"), markup=False)


def waiting_line(message: str | None) -> str | None:
    """What a run waiting for capacity waits for and when it asks next; None otherwise."""
    return show_note(message) if message is not None and is_waiting_note(message) else None
