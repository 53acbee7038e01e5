"""A ledger locked by another process is a wait, never a failure: a run whose supervisor
meets a write lock held for longer than SQLite's own wait keeps training, finishes, and is
recorded as succeeded with its metrics (issue 18, class 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

HOLD_S = 36  # past main's 30 s busy_timeout, so a run would have failed there

# A second process: takes the ledger's write lock, says so, and lets go once told to and at
# least HOLD_S later (the fault as the issue met it: a lock held for 40 s).
HOLDER = """
import sqlite3, sys, time, pathlib
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("INSERT OR REPLACE INTO meta VALUES ('held-by-test', '1')")
pathlib.Path(sys.argv[2]).write_text("held")
until = time.monotonic() + float(sys.argv[4])
while not pathlib.Path(sys.argv[3]).exists() or time.monotonic() < until:
    time.sleep(0.2)
db.execute("DELETE FROM meta WHERE key = 'held-by-test'")
db.execute("COMMIT")
"""


def _run(env: Env, run_id: str) -> dict:
    return next(r for r in env.runs() if r["id"] == run_id)


def test_a_locked_ledger_neither_kills_the_job_nor_fails_the_run(env: Env, tmp_path: Path) -> None:
    run_id = env.cli(
        "launch", "digits-fast", "--detach", "--set", "epochs=2", check=True
    ).stdout.strip()
    run_dir = env.home / "runs" / run_id
    metrics = run_dir / "metrics.jsonl"
    wait_for(
        lambda: metrics.exists() and len(metrics.read_text().splitlines()) >= 1,
        timeout=180,
        what="the first epoch",
    )
    held, release = tmp_path / "held", tmp_path / "release"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(env.home / "ledger.db"), str(held), str(release)]
        + [str(HOLD_S)]
    )
    try:
        wait_for(held.exists, timeout=60, what="the second process to hold the lock")
        # The job trains on and exits 0 while the ledger is still locked.
        wait_for((run_dir / "exit.json").exists, timeout=300, what="the job to exit")
        assert holder.poll() is None, "the lock was let go before the job ended"
        release.write_text("go")
        assert holder.wait(timeout=HOLD_S + 60) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    wait_for(
        lambda: _run(env, run_id)["state"] in ("succeeded", "failed", "stopped"),
        timeout=180,
        what="the run to end",
    )
    run = _run(env, run_id)
    assert run["state"] == "succeeded", json.loads(
        env.cli("status", run_id, "--json", check=True).stdout
    )["message"]
    lines = metrics.read_text().splitlines()
    assert len(lines) == 2 and run["metrics"]["epoch"] == json.loads(lines[-1])["epoch"]
    with Ledger(load_settings(env.home)) as ledger:
        assert ledger.get_run(run_id).last_metrics is not None
    # the run was driven by the one controller of SPOTRUN_HOME (spotrun/control/home.py), or
    # by a per-run supervisor under controller = "per-run"
    logs = [env.home / "controller.log", run_dir / "supervisor.log"]
    log = "".join(p.read_text() for p in logs if p.exists())
    assert log and "internal error" not in log
