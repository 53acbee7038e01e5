"""Starting a sweep's supervisor process, and restarting the ones that died.

Apart from the process itself (spotrun.drive.run_supervisor `--sweep`, which imports the cloud,
recipes and run control), so that every spotrun command can check its sweeps cheaply on the way
in.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import TYPE_CHECKING

from spotrun.core.locks import lock_is_held
from spotrun.core.rundir import HOME_VAR, SUPERVISOR_LOCK_FILE, SUPERVISOR_LOG_FILE
from spotrun.drive.home import ensure_controller
from spotrun.drive.supervisor import MODULE, SWEEP
from spotrun.store.ledger import Ledger
from spotrun.store.sweeps import SweepRecord, SweepStore

if TYPE_CHECKING:
    from spotrun.core.config import Settings

log = logging.getLogger(__name__)


def spawn(settings: Settings, sweep: SweepRecord) -> int:
    """Start a detached supervisor for `sweep` (or make sure the home's one controller, which
    then drives it, runs); returns its pid."""
    if settings.controller == "one":
        return ensure_controller(settings)[0]
    sweep.sweep_dir.mkdir(parents=True, exist_ok=True)
    log_fh = open(sweep.sweep_dir / SUPERVISOR_LOG_FILE, "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", MODULE, SWEEP, sweep.id],
        stdin=subprocess.DEVNULL,
        stdout=log_fh,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, HOME_VAR: str(settings.home)},
        close_fds=True,
    )
    log_fh.close()
    return proc.pid


def is_supervised(sweep: SweepRecord) -> bool:
    return lock_is_held(sweep.sweep_dir / SUPERVISOR_LOCK_FILE, sweep.supervisor_pid)


def ensure_sweeps_supervised(ledger: Ledger) -> set[str]:
    """Restart the supervisor of every live sweep that lost it; returns the sweeps' ids (their
    trial runs are theirs to drive, not a run supervisor's)."""
    store = SweepStore(ledger)
    live = store.live()
    for sweep in live:
        if not is_supervised(sweep):
            pid = spawn(ledger.settings, sweep)
            store.set_supervisor(sweep.id, pid)
            log.info("sweep %s had no supervisor; restarted (pid %d)", sweep.id, pid)
    return {s.id for s in live}
