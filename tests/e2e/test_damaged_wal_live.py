"""A WAL damaged while the controller still holds the ledger (issue 38, point 8): SQLite's
readers then trust the damaged frames through the live -shm and read garbage pages. `ls` says
in one line that the ledger is damaged and how to move it aside (it printed a traceback: a
UnicodeDecodeError of SQLite's own message); moved aside as it says, the run's folder is
adopted back into a new ledger and the run is driven to its end by the next controller."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from spotrun.core.config import load_settings
from spotrun.drive.home import running_pid
from tests.conftest import Env
from tests.e2e.test_bad_input import assert_one_line_error
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


def _status(env: Env, run_id: str) -> dict[str, object]:
    proc = env.cli("status", run_id, "--json")
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


def test_a_wal_damaged_under_a_live_controller_is_reported_then_adopted(
    env: Env, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    job = f"echo started; while [ ! -e {go} ]; do sleep 0.2; done; echo done"
    run_id = env.cli("launch", "--cmd", job, "--cloud", "local", "-d", check=True).stdout.strip()
    log = env.home / "runs" / run_id / "job.log"
    wait_for(lambda: log.exists() and "started" in log.read_text(), 120, "the job to start")

    wal = env.home / "ledger.db-wal"
    rng = random.Random(38)
    with open(wal, "r+b") as fh:  # every frame after the WAL's header: its pages are garbage
        fh.seek(32)
        fh.write(rng.randbytes(wal.stat().st_size - 32))
    listed = env.cli("ls")
    # Whether SQLite trusts the damaged frames depends on where the live -shm stood: either
    # `ls` says the ledger is damaged and how to move it aside, or the frames fail their
    # checksums, the WAL is dropped and the run's folder is adopted back at once.
    damaged = listed.returncode != 0
    if damaged:
        assert_one_line_error(listed, 1, "is damaged", "move it aside", "adopting")
    # The controller that held the damaged file is stopped, as a restart would (alive, it
    # drives the run on in its own view until the run ends, then gives the home up).
    pid = running_pid(load_settings(env.home))
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: running_pid(load_settings(env.home)) is None, 60, "it to be gone")
    if damaged:
        for path in env.home.glob("ledger.db*"):  # as the message says
            os.replace(path, path.with_name(path.name + ".bad"))
        listed = env.cli("ls")
    assert listed.returncode == 0, listed.stderr
    assert f"run {run_id} was in its folder but not in the ledger" in listed.stderr
    assert run_id in listed.stdout

    go.write_text("")
    wait_for(lambda: _status(env, run_id).get("state") == "succeeded", 180, "the run to end")
    assert "done" in log.read_text()


def test_a_damage_sqlite_reports_in_bytes_that_are_not_text_is_one_line(env: Env) -> None:
    """SQLite quotes what it read in its message: a damaged schema page's bytes that are not
    UTF-8 made Python's sqlite3 raise UnicodeDecodeError (a traceback from `ls`)."""
    env.cli("ls", check=True)  # a new ledger
    path = env.home / "ledger.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
    data = path.read_bytes()
    assert b"CREATE TABLE runs" in data
    path.write_bytes(data.replace(b"CREATE TABLE runs", b"CR\xf8ATE TABLE runs", 1))
    try:
        for args in (["ls"], ["status", "anything"]):
            assert_one_line_error(env.cli(*args), 1, "is damaged", "move it aside")
    finally:
        path.write_bytes(data)  # the fixture's clean-up reads the ledger
