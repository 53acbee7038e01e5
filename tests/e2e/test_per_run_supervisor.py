"""`controller = "per-run"`: a run's own supervisor is the home's controller limited to that run.

On the local cloud: a run of your own command is driven by a process of its own started as
spotrun.drive.run_supervisor (no home controller), through the home controller's RunThread (its
log lines say so), to its end; a sweep's own supervisor is the same module with `--sweep`; one
that gives way to a read-only ledger hands the fault to the fresh supervisor it starts, as the
home controller does.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from spotrun.core.config import load_settings
from spotrun.core.locks import process_running
from spotrun.drive.home import running_pid
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.sweeps import SweepStore
from tests.conftest import Env
from tests.helpers import wait_for
from tests.immutable_files import ImmutableFiles

pytestmark = pytest.mark.slow
DRIVER = "spotrun.drive.home_controller"  # the logger of its RunThread and SweepThread


def _argv(pid: int | None) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().rstrip("\0").split("\0")
    except OSError:
        return []


def _run(env: Env, run_id: str) -> RunRecord:
    with Ledger(load_settings(env.home)) as ledger:
        return ledger.get_run(run_id)


def _per_run(env: Env, *settings: str) -> None:
    env.home.mkdir(parents=True, exist_ok=True)
    (env.home / "config.toml").write_text("\n".join(['controller = "per-run"', *settings, ""]))


def _gated_run(env: Env, gate: Path) -> str:
    job = f"echo started; while [ ! -e {gate} ]; do sleep 0.2; done"
    return env.cli("launch", "--cmd", job, "--cloud", "local", "-d", check=True).stdout.strip()


def test_a_runs_own_supervisor_drives_it_with_the_home_controllers_code(
    env: Env, tmp_path: Path
) -> None:
    _per_run(env)
    gate = tmp_path / "go"
    run_id = _gated_run(env, gate)
    wait_for(lambda: _run(env, run_id).state.value == "running", 120, "the run to run")
    pid = _run(env, run_id).supervisor_pid
    assert _argv(pid)[1:3] == ["-m", "spotrun.drive.run_supervisor"], _argv(pid)
    assert running_pid(load_settings(env.home)) is None  # no home controller: its own process
    gate.write_text("")
    wait_for(lambda: _run(env, run_id).is_terminal, 120, "the run to end")
    assert _run(env, run_id).state.value == "succeeded", _run(env, run_id).message
    wait_for(lambda: not process_running(pid), 60, "its supervisor to exit")
    log = (env.home / "runs" / run_id / "supervisor.log").read_text()
    assert f"{DRIVER}: driving run {run_id} from state" in log, log


def test_a_sweeps_own_supervisor_is_the_same_module(env: Env) -> None:
    _per_run(env)
    sweep_id = env.cli(
        "sweep", "digits-fast", "--grid", "lr=0.1", "--set", "epochs=1", "--set", "threads=1",
        "-d", check=True,
    ).stdout.strip()  # fmt: skip

    def sweep_pid() -> int | None:
        with Ledger(load_settings(env.home)) as ledger:
            return SweepStore(ledger).get(sweep_id).supervisor_pid

    pid = wait_for(sweep_pid, 60, "the sweep's supervisor")
    assert running_pid(load_settings(env.home)) is None  # no home controller: its own process

    def ended() -> bool:
        with Ledger(load_settings(env.home)) as ledger:
            return SweepStore(ledger).get(sweep_id).state.value == "completed"

    wait_for(ended, 180, "the sweep to complete")
    wait_for(lambda: not process_running(pid), 60, "its supervisor to exit")
    with Ledger(load_settings(env.home)) as ledger:
        log = (SweepStore(ledger).get(sweep_id).sweep_dir / "supervisor.log").read_text()
    assert f"{DRIVER}: sweep {sweep_id} ended: completed" in log, log


def _told_of_a_fault(run_id: str) -> bool:
    """A supervisor of `run_id` runs, started as one told of its predecessor's write fault."""
    told = ["-m", "spotrun.drive.run_supervisor", "--after-write-fault"]
    for proc in Path("/proc").iterdir():
        argv = _argv(int(proc.name)) if proc.name.isdigit() else []
        if argv[1:4] == told and argv[-1] == run_id:
            return True
    return False


def test_a_supervisor_that_gives_way_hands_the_fault_on(
    env: Env, tmp_path: Path, immutable: ImmutableFiles
) -> None:
    _per_run(env, "ledger_write_wait_s = 3")
    gate = tmp_path / "go"
    run_id = _gated_run(env, gate)
    job_log = env.home / "runs" / run_id / "job.log"
    wait_for(lambda: job_log.exists() and "started" in job_log.read_text(), 120, "the job")
    first = _run(env, run_id).supervisor_pid
    assert first is not None
    os.kill(first, signal.SIGKILL)  # the next supervisor starts while the ledger is read-only
    wait_for(lambda: not process_running(first), 60, "the supervisor to be gone")
    immutable.lock(env.home / "ledger.db")
    assert env.cli("ls").returncode == 0  # starts a supervisor, which waits, then gives way
    wait_for(lambda: _told_of_a_fault(run_id), 120, "a fresh supervisor told of the fault")
    gate.write_text("")
    immutable.unlock(env.home / "ledger.db")
    wait_for(lambda: _run(env, run_id).is_terminal, 120, "the run to end")
    status = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    assert status["state"] == "succeeded", status["message"]
    events = " | ".join(e["message"] for e in status["events"])
    assert "could not write" in events and "readonly" in events, events
