"""`python -m spotrun.drive.run_supervisor RUN_ID`: the detached supervisor of one run.

Started by spotrun.drive.supervisor (`controller = "per-run"`; `--prewarm CLOUD` first
imports and connects what driving a run needs, then reads the run id on stdin). It takes the
run's lock, then drives the run with a RunController to its end. It lives in the sweep layer
because it resolves the run's provider: a packed sweep trial's is its share of the pack's
instance (spotrun.sweep.packs.run_provider), and control never imports sweep code.
"""

from __future__ import annotations

import logging
import os
import sys

from spotrun.cloud import get_provider
from spotrun.cloud.capabilities import Warms
from spotrun.control.controller import RunController
from spotrun.core.config import load_settings
from spotrun.core.errors import LedgerWriteError, SpotrunError
from spotrun.core.rundir import SUPERVISOR_LOCK_FILE, SUPERVISOR_LOG_FILE
from spotrun.drive.driver_process import end_on_term_or_hangup, log_to_stdout
from spotrun.drive.supervisor import spawn, try_lock
from spotrun.notify.outbox import deliver_once
from spotrun.store.ledger import Ledger
from spotrun.sweep.packs import run_provider


def _await_run(cloud: str) -> str | None:
    """The prewarm half of `main`: connect what driving a run needs, then wait for the run."""
    try:
        provider = get_provider(cloud, load_settings())
        if isinstance(provider, Warms):
            provider.warm()
    except SpotrunError:
        pass  # warming is only a head start; driving the run meets (and logs) the same error
    line = sys.stdin.readline().strip()
    if not line:
        return None
    run_dir = Ledger(load_settings()).get_run(line).run_dir
    log_fd = os.open(run_dir / SUPERVISOR_LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    return line


def main(argv: list[str]) -> int:
    if argv[:1] == ["--prewarm"]:
        awaited = _await_run(argv[1])
        if awaited is None:
            return 0
        argv = [awaited]
    run_id = argv[0]
    log_to_stdout()
    settings = load_settings()
    ledger = Ledger(settings)
    run = ledger.get_run(run_id)
    lock = try_lock(run.run_dir / SUPERVISOR_LOCK_FILE, wait_s=3.0)
    if lock is None:
        logging.info("another supervisor holds run %s; leaving it to that one", run_id)
        return 0
    end_on_term_or_hangup()  # the supervisor only: the run goes on
    try:  # only a name (the lock is the proof): a ledger not writable now is waited out below
        ledger.set_supervisor(run_id, os.getpid())
    except LedgerWriteError as exc:
        logging.warning("run %s: not named its supervisor: %s", run_id, exc.message)
    logging.info("supervising run %s (pid %d) from state %s", run_id, os.getpid(), run.state)
    try:
        final = RunController(ledger, run_id, provider=run_provider(ledger, run)).drive()
    except LedgerWriteError as exc:  # waited out past its bound: the run and its instances go on
        logging.error("run %s: the supervisor gives way: %s", run_id, exc.user_message())
        lock.close()
        try:
            logging.info("a fresh supervisor takes over (pid %d)", spawn(settings, run))
        except OSError as again:  # the home cannot be written: the next command starts one
            logging.error("no fresh supervisor started (%s)", again)
        return 1
    logging.info("run %s ended: %s %s", run_id, final.state, final.message or "")
    lock.close()
    deliver_once(ledger)  # one try; what fails waits for the home's controller to retry it
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
