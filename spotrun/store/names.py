"""Run names and ids straight from the ledger file, for shell completion.

Read-only and without the Ledger class (which opens, migrates and validates settings): a Tab
press must answer in a blink, and a missing or busy ledger simply completes nothing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

TABLES = ("runs", "sweeps")  # both have id, name, state and created_at


def refs(ledger_path: Path, table: str, incomplete: str = "") -> list[tuple[str, str]]:
    """(name or id, state) of the runs (or sweeps) whose name or id starts with `incomplete`,
    newest first: each is offered by its name, or by its id where only the id matches."""
    if table not in TABLES:
        raise ValueError(f"no such table of names: {table}")
    if not ledger_path.is_file():
        return []
    try:
        db = sqlite3.connect(f"file:{ledger_path}?mode=ro", uri=True, timeout=0.5)
    except sqlite3.Error:
        return []
    try:
        query = f"SELECT id, name, state FROM {table} ORDER BY created_at DESC"
        rows = db.execute(query).fetchall()
    except sqlite3.Error:  # busy, or a ledger without that table yet: nothing to offer
        return []
    finally:
        db.close()
    found: list[tuple[str, str]] = []
    for run_id, name, state in rows:
        if name.startswith(incomplete):
            found.append((name, state))
        elif run_id.startswith(incomplete):
            found.append((run_id, state))
    return found
