"""Names people launch again: the newest run (or sweep) takes the exact name.

One rule for runs and sweeps alike, whatever gave the name (--name, a task file's `name:`, a
sweep's --name): when the run or sweep holding the name has ended, it takes the next free
numbered suffix (`my-train` -> `my-train-1`, the one after it `my-train-2`, ...) and the new
one takes the exact name. A live one keeps its name: the new one is refused. A sweep's trials
(`SWEEP-tN`) move with their sweep's name.

Called inside the caller's write transaction, so a name is never taken twice.
"""

from __future__ import annotations

import re
import sqlite3

from spotrun.core.errors import UsageError
from spotrun.core.runstates import TERMINAL

NAME_EVENT = "name"  # the event kind of a run that took a name from an ended one
_SWEEP_RUNNING = "running"  # spotrun.store.sweeps.SweepState.RUNNING, the one live sweep state


def _trial_names(sweep: str) -> str:
    """A LIKE pattern for the trials' run names of the sweep named `sweep`."""
    return sweep.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "-t%"


def _next_suffix(db: sqlite3.Connection, table: str, name: str) -> int:
    """One more than the highest `name-N` in `table` (1 when there is none)."""
    pattern = re.compile(re.escape(name) + r"-(\d+)")
    rows = db.execute(f"SELECT name FROM {table} WHERE substr(name, 1, ?) = ?", (len(name), name))
    taken = [int(m.group(1)) for (found,) in rows if (m := pattern.fullmatch(found))]
    return max(taken, default=0) + 1


def free_run_name(db: sqlite3.Connection, name: str) -> str | None:
    """Make `name` free for a new run; the ended run that held it is renamed, and its new
    name returned (None: the name was free). UsageError while a live run holds it."""
    row = db.execute("SELECT id, state, sweep_id FROM runs WHERE name = ?", (name,)).fetchone()
    if row is None:
        return None
    if row["state"] not in {s.value for s in TERMINAL}:
        raise UsageError(
            f"a run named '{name}' is {row['state']}: a live run keeps its name",
            hint=f"choose another --name, or `spotrun stop {name}` first (the new run then "
            f"takes the name and the ended one gets a numbered suffix)",
        )
    moved = f"{name}-{_next_suffix(db, 'runs', name)}"
    db.execute("UPDATE runs SET name = ? WHERE id = ?", (moved, row["id"]))
    return moved


def free_sweep_name(db: sqlite3.Connection, name: str) -> str | None:
    """Make `name` free for a new sweep: the ended sweep that held it, and its trials' runs
    (`NAME-tN` -> `NEW-tN`), are renamed; its new name returned (None: the name was free).
    UsageError while that sweep or one of its trials is live."""
    row = db.execute("SELECT id, state FROM sweeps WHERE name = ?", (name,)).fetchone()
    if row is None:
        return None
    live = db.execute(
        "SELECT COUNT(*) FROM runs WHERE sweep_id = ? AND state NOT IN ({})".format(
            ", ".join("?" for _ in TERMINAL)
        ),
        (row["id"], *(s.value for s in TERMINAL)),
    ).fetchone()[0]
    if row["state"] == _SWEEP_RUNNING or live:
        raise UsageError(
            f"a sweep named '{name}' is still running: a live sweep keeps its name",
            hint=f"choose another --name, or `spotrun sweep stop {name}` first (the new sweep "
            "then takes the name and the ended one gets a numbered suffix)",
        )
    suffix = _next_suffix(db, "sweeps", name)
    while db.execute(
        "SELECT 1 FROM runs WHERE name LIKE ? ESCAPE '\\'", (_trial_names(f"{name}-{suffix}"),)
    ).fetchone():
        suffix += 1  # its trials' new names must be free too
    moved = f"{name}-{suffix}"
    db.execute("UPDATE sweeps SET name = ? WHERE id = ?", (moved, row["id"]))
    db.execute(
        "UPDATE runs SET name = ? || substr(name, ?) WHERE sweep_id = ? AND name LIKE ? "
        "ESCAPE '\\'",
        (moved, len(name) + 1, row["id"], _trial_names(name)),
    )
    return moved


def name_note(kind: str, name: str, moved: str) -> str:
    """What the new run or sweep says about the name it took."""
    return f"took the name '{name}'; the ended {kind} that had it is now '{moved}'"
