"""Faults of this machine's disk never end a healthy run (issue 38, points 2, 3, 8 and 9), on
the local cloud with the real CLI, tmux and controller:

- a ledger made immutable (chattr +i) under a live run: `ls` lists it with a one-line note;
  the controller started meanwhile waits, gives way past its bound to a fresh one, and once
  the ledger is writable again the run finishes and says what it waited for;
- a full disk under the run folders (a small tmpfs): the job's exit record is lost, the
  controller waits until there is room instead of failing with an internal error, and the
  run's message says why its exit code is unknown;
- random bytes over the ledger's WAL with no process holding it: SQLite drops the WAL, the
  ledger forgets the run, and `ls` reports the run's folder and adopts it back, to the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotrun.core.config import load_settings
from spotrun.drive.home import WRITE_FAULT_FILE, leave_write_fault, running_pid
from tests.conftest import Env
from tests.helpers import wait_for
from tests.immutable_files import ImmutableFiles

pytestmark = pytest.mark.slow


def _job(go: Path) -> str:
    return f"echo started; while [ ! -e {go} ]; do sleep 0.2; done; echo done"


def _status(env: Env, run_id: str) -> dict:
    return json.loads(env.cli("status", run_id, "--json", check=True).stdout)


def _launch(env: Env, go: Path) -> str:
    run_id = env.cli("launch", "--cmd", _job(go), "--cloud", "local", "-d", check=True)
    return run_id.stdout.strip()


def _wait_started(env: Env, run_id: str) -> None:
    log = env.home / "runs" / run_id / "job.log"
    wait_for(lambda: log.exists() and "started" in log.read_text(), 120, "the job to start")


def _stop_controller(env: Env) -> None:
    settings = load_settings(env.home)
    pid = running_pid(settings)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: running_pid(settings) is None, 60, "the controller to be gone")


def test_a_read_only_ledger_is_waited_out_and_the_run_finishes(
    env: Env, tmp_path: Path, immutable: ImmutableFiles
) -> None:
    env.home.mkdir(parents=True)
    (env.home / "config.toml").write_text("ledger_write_wait_s = 3\n")
    go = tmp_path / "go"
    run_id = _launch(env, go)
    _wait_started(env, run_id)
    _stop_controller(env)  # the next one starts while the ledger is read-only
    ledger = env.home / "ledger.db"
    immutable.lock(ledger)
    listed = env.cli("ls")  # lists, says why nothing moves, and starts a controller
    assert listed.returncode == 0, listed.stderr
    assert run_id in listed.stdout and "running" in listed.stdout
    assert listed.stderr.count("\n") == 1 and "ledger at" in listed.stderr
    assert "cannot be written now" in listed.stderr
    log = env.home / "controller.log"
    wait_for(
        lambda: "gives way to a fresh one" in log.read_text(), 120, "the controller to give way"
    )
    settings = load_settings(env.home)
    wait_for(lambda: running_pid(settings) is not None, 60, "a fresh controller")
    go.write_text("")
    wait_for(lambda: not env.sessions(), 120, "the job to end")
    assert _status(env, run_id)["state"] == "running"  # waits; nothing failed, nothing ended
    immutable.unlock(ledger)
    wait_for(lambda: _status(env, run_id)["state"] != "running", 120, "the run to end")
    status = _status(env, run_id)
    assert status["state"] == "succeeded", status["message"]
    events = " | ".join(e["message"] for e in status["events"])
    assert "could not write" in events and "readonly" in events
    assert "internal error" not in log.read_text()


def test_a_fault_left_by_a_controller_that_gave_way_is_recorded_by_whichever_one_follows(
    env: Env, tmp_path: Path
) -> None:
    # The controller that gives way spawns a fresh one, but a command may start another first
    # (CI: `spotrun status` won the lock, and the fault was never recorded). The fault is left
    # in the home, so the controller a command starts records it as well.
    go = tmp_path / "go"
    run_id = _launch(env, go)
    _wait_started(env, run_id)
    _stop_controller(env)
    settings = load_settings(env.home)
    fault = "cannot write the ledger now (attempt to write a readonly database)"
    assert leave_write_fault(settings, (time.time() - 30, fault))  # as one that gave way does
    go.write_text("")
    assert env.cli("ls").returncode == 0  # starts a controller, told nothing on its command line
    wait_for(lambda: _status(env, run_id)["state"] != "running", 120, "the run to end")
    status = _status(env, run_id)
    assert status["state"] == "succeeded", status["message"]
    recorded = [e["message"] for e in status["events"] if "could not write" in e["message"]]
    assert len(recorded) == 1 and "readonly database" in recorded[0], status["events"]
    assert not (env.home / WRITE_FAULT_FILE).exists()  # taken: recorded once


@pytest.fixture
def small_runs_disk(env: Env) -> Iterator[Path]:
    """SPOTRUN_HOME/runs on a 2 MiB tmpfs: run folders fill up, the ledger does not."""
    runs = env.home / "runs"
    runs.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(runs)], check=True)
    try:
        yield runs
    finally:
        subprocess.run(["tmux", "kill-server"], env=env.vars, check=False)
        subprocess.run(["umount", "-l", str(runs)], check=False)


def test_a_full_disk_is_waited_out_and_the_lost_exit_code_explained(
    env: Env, tmp_path: Path, small_runs_disk: Path
) -> None:
    go = tmp_path / "go"
    run_id = _launch(env, go)
    _wait_started(env, run_id)
    filler = small_runs_disk / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
    go.write_text("")  # the job ends, its exit record cannot be written
    wait_for(
        lambda: any("waiting" in e["message"] for e in _status(env, run_id)["events"]),
        120,
        "the controller to wait for room",
    )
    assert _status(env, run_id)["state"] == "running"
    listed = env.cli("ls")
    assert listed.returncode == 0 and "No space left on device" in listed.stderr
    filler.unlink()
    wait_for(lambda: _status(env, run_id)["state"] != "running", 120, "the run to end")
    status = _status(env, run_id)
    assert status["state"] == "failed"
    assert "exit record" in status["message"] and "is empty" in status["message"]
    assert "internal error" not in status["message"]
    events = " | ".join(e["message"] for e in status["events"])
    assert "No space left on device" in events


def test_a_run_the_damaged_ledger_forgot_is_adopted_back(env: Env, tmp_path: Path) -> None:
    go = tmp_path / "go"
    run_id = _launch(env, go)
    _wait_started(env, run_id)
    _stop_controller(env)  # nobody holds the ledger: the next opener reads the WAL afresh
    wal = env.home / "ledger.db-wal"
    with open(wal, "r+b") as fh:
        fh.write(os.urandom(64))  # its header and first frame's: every frame fails its checksum
    listed = env.cli("ls")
    assert listed.returncode == 0, listed.stderr
    assert f"run {run_id} was in its folder but not in the ledger" in listed.stderr
    assert run_id in listed.stdout and "running" in listed.stdout
    go.write_text("")
    wait_for(lambda: _status(env, run_id)["state"] != "running", 120, "the run to end")
    status = _status(env, run_id)
    assert status["state"] == "succeeded", status["message"]
    assert "done" in (env.home / "runs" / run_id / "job.log").read_text()
