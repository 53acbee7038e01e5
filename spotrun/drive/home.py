"""The one controller of a SPOTRUN_HOME, seen from outside it: its lock, its pid, starting it.

With `controller = "one"` (the default) a single detached process drives every live run and
sweep of the home, each as a thread of its own (spotrun.drive.home_controller). It holds
SPOTRUN_HOME/controller.lock for its whole life, with its pid written in it; any command that
finds something live and no controller starts one (`ensure_controller`), and it exits once
nothing is live. A run's own lock (supervisor.lock in its folder) is still taken by the thread
that drives it, so that a run is never driven twice, by this process or any other.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

from spotrun.core.locks import lock_is_held, try_lock
from spotrun.core.rundir import HOME_VAR

if TYPE_CHECKING:
    from spotrun.core.config import Settings

CONTROLLER_LOCK_FILE = "controller.lock"
CONTROLLER_LOG_FILE = "controller.log"
# A write fault a controller gave way to, left for whichever controller takes the home next
# (a command may start one before the one it spawned has taken the lock).
WRITE_FAULT_FILE = "controller.write_fault"
MODULE = "spotrun.drive.home_controller"
WAKE = signal.SIGUSR1  # "look at the ledger now": a run or sweep was just handed to it


def lock_path(settings: Settings) -> Path:
    return settings.home / CONTROLLER_LOCK_FILE


def _pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text().strip() or "0") or None
    except (OSError, ValueError):
        return None


def running_pid(settings: Settings) -> int | None:
    """The pid of the home's live controller, or None when none runs."""
    path = lock_path(settings)
    pid = _pid_in(path)
    return pid if lock_is_held(path, pid) else None


def acquire(home: Path) -> IO[str] | None:
    """Become the controller of `home` (a SPOTRUN_HOME): the lock held open (keep the handle),
    with this process's pid in it; None if another process holds it. Takes a path, not the
    settings, so that a controller can try it before it loads the settings (pydantic)."""
    home.mkdir(parents=True, exist_ok=True)
    fh = try_lock(home / CONTROLLER_LOCK_FILE)
    if fh is None:
        return None
    os.ftruncate(fh.fileno(), 0)  # opened for appending: the pid lands at 0
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh


# `python -m spotrun.drive.home_controller --after-write-fault SINCE FAULT`: started by a
# controller that gave way to a write fault, so that the fresh one records it in the runs.
AFTER_WRITE_FAULT = "--after-write-fault"


def leave_write_fault(settings: Settings, write_fault: tuple[float, str]) -> bool:
    """Before a controller that gave way lets go of the home: the fault it waited on (since
    when, what), for the next holder to record in the runs. False if the home cannot be
    written (the spawned controller is still told on its command line)."""
    began_at, fault = write_fault
    try:
        (settings.home / WRITE_FAULT_FILE).write_text(
            json.dumps({"began_at": began_at, "fault": fault})
        )
    except OSError:
        return False
    return True


def take_write_fault(settings: Settings) -> tuple[float, str] | None:
    """The fault left by a controller that gave way, taken (the file removed): called by the
    home's new holder, once it has the lock, so that it is recorded once."""
    path = settings.home / WRITE_FAULT_FILE
    try:
        told = json.loads(path.read_text())
        left = (float(told["began_at"]), str(told["fault"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        left = None  # unreadable: nothing to record, and not to be read again
    # A home that cannot be written keeps the file: the next holder records it again, at worst
    with contextlib.suppress(OSError):
        path.unlink()
    return left


def spawn_controller(settings: Settings, write_fault: tuple[float, str] | None = None) -> int:
    """Start a detached controller for the home (told of a write fault its predecessor waited
    on: since when, and what); returns its pid."""
    settings.home.mkdir(parents=True, exist_ok=True)
    told = [AFTER_WRITE_FAULT, repr(write_fault[0]), write_fault[1]] if write_fault else []
    with open(settings.home / CONTROLLER_LOG_FILE, "ab") as log_fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, *told],
            stdin=subprocess.DEVNULL,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not in the terminal's process group: Ctrl-C spares it
            env={**os.environ, HOME_VAR: str(settings.home)},
            close_fds=True,
        )
    return proc.pid


def ensure_controller(settings: Settings) -> tuple[int, bool]:
    """The home's controller pid, starting one if none runs; and whether it was started now.
    A running one is woken, so that a run or sweep just recorded is picked up at once."""
    pid = running_pid(settings)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, WAKE)
        return pid, False
    return spawn_controller(settings), True
