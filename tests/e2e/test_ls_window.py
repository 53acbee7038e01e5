"""`spotrun ls`'s recent window through the real CLI on the local cloud: live runs and those
ended in the last 24 h, a footer counting the rest, `--since` and `--all` for more."""

from __future__ import annotations

import re
import sqlite3
import time

from tests.conftest import Env

DAY_S = 86400.0
RUN_ROW = re.compile(r"[0-9a-f]{12}\s+(\S+)")  # a table row: the run's id, then its name


def test_ls_shows_a_day_of_ended_runs_and_counts_the_older(env: Env) -> None:
    for name in ("old", "new"):
        env.cli("launch", "--cmd", "true", "--name", name, timeout=120, check=True)
    # "old" ended three days ago, as a ledger kept that long has it
    back = time.time() - 3 * DAY_S
    with sqlite3.connect(env.home / "ledger.db") as db:
        db.execute(
            "UPDATE runs SET created_at = ?, started_at = ?, ended_at = ? WHERE name = 'old'",
            (back - 60, back - 50, back),
        )

    def names(*args: str) -> list[str]:
        listed = env.cli("ls", *args, check=True).stdout.splitlines()
        return [row.group(1) for line in listed if (row := RUN_ROW.match(line))]

    shown = env.cli("ls", check=True).stdout
    assert "new" in shown and " old " not in shown
    footer = "1 run ended more than 1d ago not shown: `spotrun ls --all` lists every run"
    assert shown.splitlines()[-1].startswith(footer), shown
    assert names("--since", "4d") == ["old", "new"] and names("--all") == ["old", "new"]
    assert names("--since", "2d") == ["new"]
    bad = env.cli("ls", "--since", "soon")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
