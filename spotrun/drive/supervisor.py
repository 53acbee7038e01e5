"""The run supervisor seen from outside: its lock, starting it (`controller = "per-run"`).

The supervisor is a detached process per run that drives it to the end: the home's controller
limited to that run (spotrun.drive.run_supervisor; this module stays light, for `spotrun ls` to
check on runs).

(With `controller = "one"`, the default, one process drives every run and sweep of the home
instead: spotrun.drive.home. `spawn` and `ensure_supervised` then start that one; a run's
lock below is then held by the thread of that process that drives it.)

`launch` starts one and returns (or follows along); it outlives the terminal. A supervisor
holds an exclusive lock on its run's folder for its whole life, so there is never more than one
per run, and any spotrun command can tell whether one is alive by trying that lock: the next
command after a crash (or a reboot) starts a new one, which picks the run up where it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

from spotrun.core.errors import LedgerWriteError
from spotrun.core.locks import lock_is_held, process_running
from spotrun.core.rundir import HOME_VAR, SUPERVISOR_LOCK_FILE, SUPERVISOR_LOG_FILE
from spotrun.drive.home import AFTER_WRITE_FAULT, ensure_controller, running_pid

if TYPE_CHECKING:  # annotations only: the home's controller imports this before it has the home
    from spotrun.core.config import Settings
    from spotrun.store.ledger import Ledger, RunRecord

MODULE = "spotrun.drive.run_supervisor"
PREWARM = "--prewarm"  # `MODULE --prewarm CLOUD`: warm up first, then read the run id on stdin
SWEEP = "--sweep"  # `MODULE --sweep SWEEP_ID`: a sweep's supervisor (spotrun.drive.revive)


def is_supervised(run: RunRecord) -> bool:
    return lock_is_held(run.run_dir / SUPERVISOR_LOCK_FILE, run.supervisor_pid)


def spawn(settings: Settings, run: RunRecord, write_fault: tuple[float, str] | None = None) -> int:
    """Start a detached supervisor for `run` (or make sure the home's one controller runs),
    told of a write fault its predecessor gave way to (since when, what); returns its pid."""
    if settings.controller == "one":
        return ensure_controller(settings)[0]
    told = [AFTER_WRITE_FAULT, repr(write_fault[0]), write_fault[1]] if write_fault else []
    run.run_dir.mkdir(parents=True, exist_ok=True)
    log_fh = open(run.run_dir / SUPERVISOR_LOG_FILE, "ab")
    env = {**os.environ, HOME_VAR: str(settings.home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", MODULE, *told, run.id],
        stdin=subprocess.DEVNULL,
        stdout=log_fh,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # not in the terminal's process group: Ctrl-C does not reach it
        env=env,
        close_fds=True,
    )
    log_fh.close()
    return proc.pid


class Prewarmed:
    """A supervisor started before its run exists, so that its imports and cloud clients are
    ready when the run is handed to it (they take a second or more; `launch` plans meanwhile).

    Hand it a run with `hand(run)`; `cancel()` (or this process ending) lets it exit unused.
    """

    def __init__(self, settings: Settings, cloud: str) -> None:
        self.settings = settings
        self.proc: subprocess.Popen[bytes] | None = None
        self.home_pid: int | None = None
        if settings.controller == "one":  # the home's controller is the warm process
            self.home_pid = ensure_controller(settings)[0]
            return
        env = {**os.environ, HOME_VAR: str(settings.home)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, PREWARM, cloud],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
            close_fds=True,
        )

    def hand(self, run: RunRecord) -> int:
        """Give it `run`; returns its pid. It logs to the run's supervisor.log from now on."""
        run.run_dir.mkdir(parents=True, exist_ok=True)
        if self.proc is None:  # the home's controller: it finds the run in the ledger
            if running_pid(self.settings) is None and process_running(self.home_pid):
                return self.home_pid or 0  # started for this launch, still taking its lock
            return ensure_controller(self.settings)[0]
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"{run.id}\n".encode())
            self.proc.stdin.close()
        except BrokenPipeError:  # it died while warming up: start a plain one
            return spawn(self.settings, run)
        return self.proc.pid

    def cancel(self) -> None:
        if self.proc is not None and self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()


def ensure_supervised(ledger: Ledger, live_sweeps: set[str]) -> list[str]:
    """Start a supervisor for every live run that has none, except the trials of the sweeps
    in `live_sweeps` (a live sweep drives its own trials); returns the run ids restarted."""
    active = ledger.active_runs()
    if not active and not live_sweeps:
        return []  # nothing live: no settings to read (listing finished runs stays light)
    if ledger.settings.controller == "one":
        return _ensure_controller(ledger, live_sweeps)
    restarted = []
    for run in active:
        if run.sweep_id in live_sweeps:
            continue
        if not is_supervised(run):
            pid = spawn(ledger.settings, run)
            _name_driver(ledger, run.id, pid, f"supervisor was not running; restarted (pid {pid})")
            restarted.append(run.id)
    return restarted


def _ensure_controller(ledger: Ledger, live_sweeps: set[str]) -> list[str]:
    """The home's one controller runs whenever something is live: start it if not."""
    runs = [r for r in ledger.active_runs() if r.sweep_id not in live_sweeps]
    if not runs and not live_sweeps:
        return []
    if running_pid(ledger.settings) is not None:
        return []  # it drives them (or picks up a new one within a second)
    pid, _started = ensure_controller(ledger.settings)
    for run in runs:
        note = f"supervisor was not running; restarted (controller pid {pid})"
        _name_driver(ledger, run.id, pid, note)
    return [r.id for r in runs]


def _name_driver(ledger: Ledger, run_id: str, pid: int, note: str) -> None:
    """Record who drives the run now. Only a name (the lock is the proof): a ledger that
    cannot be written now does not fail the command that started the driver, which waits."""
    try:
        ledger.set_supervisor(run_id, pid)
        ledger.add_event(run_id, "supervisor", note)
    except LedgerWriteError:
        return
