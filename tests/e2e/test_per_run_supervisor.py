"""`controller = "per-run"`: a run's own supervisor is the home's controller limited to that run.

On the local cloud: a run of your own command is driven by a process of its own started as
spotrun.drive.run_supervisor (no home controller), through the home controller's RunThread (its
log lines say so), to its end; a sweep's own supervisor is the same module with `--sweep`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spotrun.core.config import load_settings
from spotrun.core.locks import process_running
from spotrun.drive.home import running_pid
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.sweeps import SweepStore
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow
DRIVER = "spotrun.drive.home_controller"  # the logger of its RunThread and SweepThread


def _argv(pid: int | None) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def _run(env: Env, run_id: str) -> RunRecord:
    with Ledger(load_settings(env.home)) as ledger:
        return ledger.get_run(run_id)


def _per_run(env: Env) -> None:
    env.home.mkdir(parents=True, exist_ok=True)
    (env.home / "config.toml").write_text('controller = "per-run"\n')


def test_a_runs_own_supervisor_drives_it_with_the_home_controllers_code(
    env: Env, tmp_path: Path
) -> None:
    _per_run(env)
    gate = tmp_path / "go"
    job = f"echo started; while [ ! -e {gate} ]; do sleep 0.2; done"
    run_id = env.cli("launch", "--cmd", job, "--cloud", "local", "-d", check=True).stdout.strip()
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
