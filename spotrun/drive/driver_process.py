"""The setup every long-lived driving process shares: the home's controller, a run's
supervisor and a sweep's supervisor log to stdout (their log file) and, once they hold their
lock, dump every stack on SIGUSR2 and end on SIGTERM or SIGHUP (what they drive goes on, and
the next command starts another). Also how such a process is known by its command line."""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from spotrun.drive import home, supervisor

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_to_stdout(log_format: str = LOG_FORMAT) -> None:
    logging.basicConfig(level=logging.INFO, format=log_format, stream=sys.stdout)


def _raise_exit(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def end_on_term_or_hangup() -> None:
    """`kill -USR2 PID` prints every thread's stack; SIGTERM and SIGHUP end the process
    through SystemExit, so its `finally` blocks and lock release run."""
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    signal.signal(signal.SIGTERM, _raise_exit)
    signal.signal(signal.SIGHUP, _raise_exit)


# The modules a driving process runs as (`python -m MODULE`), an older spotrun's included: a
# controller or supervisor it started drives on after an upgrade (its lock is what counts; a
# lookup by command line must know its old name too).
DRIVER_MODULES = (
    home.MODULE,
    supervisor.MODULE,
    "spotrun.sweep.home_controller",
    "spotrun.sweep.run_supervisor",
    "spotrun.sweep.supervisor",
)


def is_driver(argv: Sequence[str]) -> bool:
    """`argv` (a process's command line, as /proc/PID/cmdline splits it) is a driving process."""
    return any(a == "-m" and m in DRIVER_MODULES for a, m in zip(argv, argv[1:], strict=False))
