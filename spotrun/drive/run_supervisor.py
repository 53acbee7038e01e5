"""`python -m spotrun.drive.run_supervisor RUN_ID`: the detached supervisor of one run
(`controller = "per-run"`), which is the home's controller limited to that one run.

Started by spotrun.drive.supervisor. It drives the run with the home controller's own RunThread,
in this process's main thread: the run's lock, its driver's name in the ledger, its
RunController and giving way on a write fault are that one code path. `--prewarm CLOUD` first
imports and connects what driving a run needs, then reads the run id on stdin;
`--sweep SWEEP_ID` drives one sweep the same way (started by spotrun.drive.revive);
`--after-write-fault SINCE FAULT RUN_ID` is the fresh supervisor of a run whose supervisor gave
way to a write fault, told of it so that it records it in the run.
"""

from __future__ import annotations

import logging
import os
import sys

from spotrun.cloud import get_provider
from spotrun.cloud.capabilities import Warms
from spotrun.core.config import load_settings
from spotrun.core.errors import SpotrunError
from spotrun.core.rundir import SUPERVISOR_LOG_FILE
from spotrun.drive.driver_process import end_on_term_or_hangup, log_to_stdout
from spotrun.drive.home import AFTER_WRITE_FAULT
from spotrun.drive.home_controller import HomeController, RunThread, SweepThread
from spotrun.drive.supervisor import PREWARM, SWEEP, spawn
from spotrun.notify.outbox import deliver_once
from spotrun.store.ledger import Ledger

LOCK_WAIT_S = 3.0  # a predecessor that gave way may still be letting go of the lock


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
    if argv[:1] == [PREWARM]:
        awaited = _await_run(argv[1])
        if awaited is None:
            return 0
        argv = [awaited]
    log_to_stdout()
    settings = load_settings()
    end_on_term_or_hangup()  # the supervisor only: the run goes on
    if argv[:1] == [SWEEP]:
        SweepThread(settings, argv[1], lock_wait_s=LOCK_WAIT_S).run()
        deliver_once(Ledger(settings))  # one try; what fails waits for the home's controller
        return 0
    told = (float(argv[1]), argv[2]) if argv[:1] == [AFTER_WRITE_FAULT] else (0.0, "")
    run_id = argv[-1]
    controller = HomeController(settings, write_fault=told)
    RunThread(settings, run_id, controller, lock_wait_s=LOCK_WAIT_S).run()
    gave_way = controller.gave_way_to
    if gave_way is not None:  # the run and its instances go on: a fresh supervisor takes over
        try:
            run = controller.ledger.get_run(run_id)
            pid = spawn(settings, run, (gave_way.began_at, gave_way.fault))
        except (OSError, SpotrunError) as exc:  # the next command starts one
            logging.error("no fresh supervisor started (%s)", exc)
            return 1
        logging.info("a fresh supervisor takes over (pid %d)", pid)
        return 1
    deliver_once(controller.ledger)  # one try; what fails waits for the home's controller
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
