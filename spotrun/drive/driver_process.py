"""The setup every long-lived driving process shares: the home's controller, a run's
supervisor and a sweep's supervisor log to stdout (their log file) and, once they hold their
lock, dump every stack on SIGUSR2 and end on SIGTERM or SIGHUP (what they drive goes on, and
the next command starts another)."""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
from types import FrameType

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
