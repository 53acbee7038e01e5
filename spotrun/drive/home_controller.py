"""The one controller of a SPOTRUN_HOME: every live run and sweep, each a thread of this process.

`python -m spotrun.drive.home_controller` (started detached by any command that finds something
live and no controller: spotrun.drive.home) takes SPOTRUN_HOME/controller.lock first (one
started beside a running one leaves before loading anything heavy), then every
second (at once when a command wakes it with SIGUSR1) looks at the ledger: each live sweep gets
a thread running its SweepSupervisor (which drives its trials in threads of its own), and each
other live run a thread running its RunController, with the run's own lock held, exactly as a
per-run supervisor does. The state machine, recovery, sync, budget and sweep logic are
the same code; only the process is shared. A thread that ends with a run still live (a bug, a
crash of its controller) is started again after RESTART_S.

Nothing is kept only in memory: the ledger and the cloud's tags are the state, so a crash of
this process loses nothing, and the next controller picks every run up where it is. One run
never waits on another: each has its own thread, and every remote call is bounded
(spotrun.remote.ssh), so a host that hangs holds its own run only. With nothing live for
LINGER_S (a launch may be on its way) it exits; it stays while notifications wait to be sent
(spotrun.notify.outbox, a thread of this process).

With `controller = "per-run"` the same threads' code drives one run or one sweep in a process
of its own (spotrun.drive.run_supervisor): one code path drives runs either way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from typing import IO, TYPE_CHECKING

from spotrun.core.errors import LedgerWriteError, SpotrunError, StateError
from spotrun.core.home import default_home
from spotrun.core.lazy import lazy_module
from spotrun.core.locks import try_lock
from spotrun.core.rundir import SUPERVISOR_LOCK_FILE
from spotrun.drive.driver_process import end_on_term_or_hangup, log_to_stdout
from spotrun.drive.home import (
    AFTER_WRITE_FAULT,
    WAKE,
    acquire,
    leave_write_fault,
    spawn_controller,
    take_write_fault,
)

if TYPE_CHECKING:
    from spotrun.control import controller, write_faults
    from spotrun.core import config
    from spotrun.notify import outbox
    from spotrun.store import adopt, ledger, sweeps
    from spotrun.sweep import packs, supervisor
else:
    # The settings and the run machinery (~0.3 s of CPU) load once the home's lock is ours: a
    # controller started beside a running one (two commands a moment apart) exits without them.
    config = lazy_module("spotrun.core.config")
    ledger = lazy_module("spotrun.store.ledger")
    sweeps = lazy_module("spotrun.store.sweeps")
    adopt = lazy_module("spotrun.store.adopt")
    outbox = lazy_module("spotrun.notify.outbox")
    write_faults = lazy_module("spotrun.control.write_faults")
    controller = lazy_module("spotrun.control.controller")
    packs = lazy_module("spotrun.sweep.packs")
    supervisor = lazy_module("spotrun.sweep.supervisor")  # a sweep's: when one is live

log = logging.getLogger(__name__)

POLL_S = 1.0  # how often the ledger is looked at when nobody wakes the controller
LINGER_S = 10.0  # nothing live this long: exit
RESTART_S = 10.0  # a thread that ended with its run still live is started again after this


class RunThread(threading.Thread):
    """Drives one run to its end, holding the run's lock (so nothing else drives it). A run's
    own supervisor calls `run()` in its main thread, waiting `lock_wait_s` for a predecessor
    that is letting go."""

    def __init__(
        self,
        settings: config.Settings,
        run_id: str,
        home: HomeController,
        lock_wait_s: float = 0.0,
    ) -> None:
        super().__init__(name=f"run-{run_id}", daemon=True)
        self.settings = settings
        self.run_id = run_id
        self.lock_wait_s = lock_wait_s
        self.home = home  # told when this machine could not write for too long
        self.inherited = home.write_fault  # the fault the controller before this one gave way to

    def run(self) -> None:
        try:
            runs = ledger.Ledger(self.settings)
        except LedgerWriteError as exc:
            log.error("run %s: %s", self.run_id, exc.user_message())
            return  # tried again after RESTART_S
        try:
            run = runs.get_run(self.run_id)
            # a run recorded before its folder (an older spotrun) is driven, not retried forever
            run.run_dir.mkdir(parents=True, exist_ok=True)
            lock = try_lock(run.run_dir / SUPERVISOR_LOCK_FILE, wait_s=self.lock_wait_s)
            if lock is None:  # another process drives it (a per-run supervisor, `stop`)
                log.info("another process drives run %s; leaving it to that one", self.run_id)
                return
            try:
                unnamed = _name_driver(runs, self.run_id)
                log.info("driving run %s from state %s", self.run_id, run.state)
                provider = packs.run_provider(runs, run)  # a pack trial's: its pack share
                driver = controller.RunController(runs, self.run_id, provider=provider)
                for began_at, fault in (self.inherited, unnamed):
                    if fault:
                        driver.write_faults.inherit(fault, began_at)
                final = driver.drive()
                log.info("run %s ended: %s %s", self.run_id, final.state, final.message or "")
            finally:
                lock.close()
        except write_faults.WriteFaultGaveWay as exc:  # waited out past its bound: nothing failed
            log.error("run %s: the controller gives way: %s", self.run_id, exc.user_message())
            self.home.gave_way(exc)
        except Exception:  # its controller has recorded the failure; the other runs go on
            log.exception("run %s: its controller stopped with an error", self.run_id)
        finally:
            runs.close()


def _name_driver(runs: ledger.Ledger, run_id: str) -> tuple[float, str]:
    """The run's supervisor_pid: this process. Only a name (its lock is the proof), so a
    ledger that cannot be written now does not hold the run up: its controller waits it out.
    The fault met, to record once writes work (when, what), or (0, "")."""
    try:
        runs.set_supervisor(run_id, os.getpid())
    except LedgerWriteError as exc:
        log.warning("run %s: not named its driver: %s", run_id, exc.message)
        return time.time(), exc.user_message()
    return 0.0, ""


class SweepThread(threading.Thread):
    """Drives one sweep (its trials in threads of their own), holding the sweep's lock; a
    sweep's own supervisor calls `run()` in its main thread, as RunThread's."""

    def __init__(self, settings: config.Settings, sweep_id: str, lock_wait_s: float = 0.0) -> None:
        super().__init__(name=f"sweep-{sweep_id}", daemon=True)
        self.settings = settings
        self.sweep_id = sweep_id
        self.lock_wait_s = lock_wait_s

    def run(self) -> None:
        runs = ledger.Ledger(self.settings)
        store = sweeps.SweepStore(runs)
        try:
            sweep = store.get(self.sweep_id)
            lock = try_lock(sweep.sweep_dir / SUPERVISOR_LOCK_FILE, wait_s=self.lock_wait_s)
            if lock is None:
                log.info("another process drives sweep %s; leaving it to that one", self.sweep_id)
                return
            try:
                store.set_supervisor(self.sweep_id, os.getpid())
                final = supervisor.SweepSupervisor(self.settings, self.sweep_id).drive()
                log.info("sweep %s ended: %s %s", self.sweep_id, final.state, final.message or "")
            except SpotrunError as exc:
                log.error("sweep %s failed: %s", self.sweep_id, exc.user_message())
                with contextlib.suppress(StateError):  # it had ended meanwhile
                    store.end(self.sweep_id, sweeps.SweepState.FAILED, exc.user_message())
            finally:
                lock.close()
        except Exception:
            log.exception("sweep %s: its supervisor stopped with an error", self.sweep_id)
        finally:
            runs.close()


class HomeController:
    def __init__(
        self,
        settings: config.Settings,
        wake: threading.Event | None = None,
        write_fault: tuple[float, str] = (0.0, ""),
    ) -> None:
        self.settings = settings
        self.write_fault = write_fault  # one its predecessor gave way to: (since, what)
        self.ledger = ledger.Ledger(settings)
        self.threads: dict[str, threading.Thread] = {}
        self.started_at: dict[str, float] = {}
        self.wake = wake if wake is not None else threading.Event()
        self.give_way = threading.Event()
        self.gave_way_to: write_faults.WriteFaultGaveWay | None = None
        self.outbox = outbox.OutboxWorker(settings)  # notifications, sent from this process

    def _start(self, key: str, thread: threading.Thread) -> None:
        known = self.threads.get(key)
        if known is not None and known.is_alive():
            return
        if known is not None and time.monotonic() - self.started_at[key] < RESTART_S:
            return  # it ended with its run live: not again at once
        self.threads[key] = thread
        self.started_at[key] = time.monotonic()
        thread.start()

    def tick(self) -> int:
        """Start a thread for every live sweep and run that has none; how many are live."""
        live = sweeps.SweepStore(self.ledger).live()
        for sweep in live:
            self._start(f"sweep:{sweep.id}", SweepThread(self.settings, sweep.id))
        swept = {s.id for s in live}  # their trials are theirs to drive
        active = self.ledger.active_run_sweeps()
        runs = [run_id for run_id, sweep_id in active.items() if sweep_id not in swept]
        for run_id in runs:
            self._start(f"run:{run_id}", RunThread(self.settings, run_id, self))
        self.write_fault = (0.0, "")  # handed to the runs live at the start only
        alive = sum(1 for t in self.threads.values() if t.is_alive())
        return len(live) + len(runs) + alive

    def adopt(self) -> None:
        """Runs whose folders the ledger lost (a damaged ledger) recorded again, to drive."""
        try:
            adopted = adopt.adopt_run_folders(self.ledger)
        except LedgerWriteError as exc:
            log.warning("run folders the ledger does not know not adopted: %s", exc.message)
            return
        for run in adopted:
            log.warning(
                "run %s was in its folder but not in the ledger: adopted back as %s",
                run.run_id,
                run.state.value,
            )

    def _anything_live(self) -> bool:
        return bool(self.ledger.active_run_sweeps() or sweeps.SweepStore(self.ledger).live())

    def serve(self, lock: IO[str]) -> int:
        idle_since: float | None = None
        self.outbox.start()
        while True:
            if self.give_way.is_set():
                return self._give_way(lock)
            if self.tick() or self.outbox.pending:  # it stays while notifications wait
                idle_since = None
            else:
                idle_since = idle_since if idle_since is not None else time.monotonic()
                if time.monotonic() - idle_since >= LINGER_S:
                    # Let go first, then look once more: a command that recorded a run before
                    # this look is seen now, one after it finds no controller and starts one.
                    lock.close()
                    if not self._anything_live():
                        log.info("nothing live: the controller exits")
                        return 0
                    again = acquire(self.settings.home)
                    if again is None:  # a new controller has taken over
                        return 0
                    lock, idle_since = again, None
            self.wake.wait(POLL_S)
            self.wake.clear()

    def gave_way(self, exc: write_faults.WriteFaultGaveWay) -> None:
        """A run thread waited on a write fault past its bound: the whole process gives way."""
        if self.gave_way_to is None:
            self.gave_way_to = exc
        self.give_way.set()

    def _give_way(self, lock: IO[str]) -> int:
        """A run could not be written for longer than its bound: let go of the home and hand
        it to a fresh controller (a fresh ledger connection; one opened while the ledger was
        read-only never writes again). Every instance goes on; the runs' own locks go with
        this process, and the fresh controller takes them up as it does after a crash."""
        told = self.gave_way_to
        fault = (told.began_at, told.fault) if told else None
        if fault is not None:  # for whichever controller takes the home next
            leave_write_fault(self.settings, fault)
        lock.close()
        try:
            pid = spawn_controller(self.settings, fault)
        except OSError as exc:  # the home itself cannot be written: the next command starts one
            log.error("the controller gives way; no fresh one started (%s)", exc)
            return 1
        log.info("the controller gives way to a fresh one (pid %d)", pid)
        return 1


def main() -> int:
    log_to_stdout("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    # The wake handler goes in before the lock is taken: once the lock holds this pid, any
    # command may send WAKE, and SIGUSR1's default action would kill the controller unseen.
    woken = threading.Event()
    signal.signal(WAKE, lambda _s, _f: woken.set())
    home = default_home().absolute()  # the settings' home: config.toml cannot set it
    lock = acquire(home)
    if lock is None:
        log.info("another controller holds %s; leaving it to that one", home)
        return 0
    end_on_term_or_hangup()  # the controller only: the runs go on
    settings = config.load_settings(home)
    # Ready to drive before the first look: a launch starts its controller while it plans,
    # so that its run is driven the moment it is handed over (spotrun.drive.supervisor).
    _ = controller.RunController, packs.run_provider
    told = sys.argv[1:4]
    write_fault = (float(told[1]), told[2]) if told[:1] == [AFTER_WRITE_FAULT] else (0.0, "")
    write_fault = take_write_fault(settings) or write_fault  # left by the one that gave way
    home_controller = HomeController(settings, wake=woken, write_fault=write_fault)
    log.info("controller of %s (pid %d)", settings.home, os.getpid())
    home_controller.adopt()
    return home_controller.serve(lock)


if __name__ == "__main__":
    sys.exit(main())
