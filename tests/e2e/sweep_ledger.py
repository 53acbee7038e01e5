"""What the sweep tests read from the ledger themselves: a sweep's state and the count of sweeps
and runs. Polling `spotrun sweep status` or `ls` for these is one spotrun process (~0.4-0.8 s of
CPU) after another for the whole wait, and each such command would also restart a sweep's
controller that died; the CLI is kept for the assertions about its own output."""

from __future__ import annotations

import sqlite3

from spotlab.harness import Env


def sweep_state(env: Env, sweep_id: str) -> str:
    """The sweep's state: the column `sweep status` prints."""
    with sqlite3.connect(env.home / "ledger.db") as db:
        return str(db.execute("SELECT state FROM sweeps WHERE id = ?", (sweep_id,)).fetchone()[0])


def sweeps_and_runs(env: Env) -> tuple[int, int]:
    """(sweeps, runs) in the ledger, none when there is no ledger: what bad input leaves at 0."""
    path = env.home / "ledger.db"
    if not path.exists():
        return 0, 0
    with sqlite3.connect(path) as db:
        have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        sweeps = db.execute("SELECT COUNT(*) FROM sweeps").fetchone()[0] if "sweeps" in have else 0
        runs = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    return int(sweeps), int(runs)
