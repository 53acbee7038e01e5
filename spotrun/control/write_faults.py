"""Writes this machine cannot make now (a read-only ledger or disk, a full disk, an I/O error),
met while driving a run: waited out like a busy ledger, visibly and with a bound, never by
ending the run's instances. Past the bound the controller gives way: the LedgerWriteError
leaves `drive`, and its process lets go of its locks so that a fresh one (with a fresh
connection to the ledger) takes over (spotrun.drive.home_controller, run_supervisor)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from spotrun.core.errors import LedgerWriteError, SpotrunError
from spotrun.core.waiting import Clock, pause
from spotrun.store.connection import WRITE_FAULT_ERRNOS
from spotrun.store.ledger import Ledger

FIRST_PAUSE_S = 0.5
LONGEST_PAUSE_S = 5.0
REPORT_EVERY_S = 60.0  # a line in the log this often while the fault lasts


def _os_fault(exc: BaseException) -> OSError | None:
    """The OSError that says a write of ours failed on this machine, if `exc` is or wraps one."""
    seen: BaseException | None = exc
    for _ in range(4):  # an error, its cause, theirs: no deeper
        if seen is None:
            return None
        if isinstance(seen, OSError) and seen.errno in WRITE_FAULT_ERRNOS:
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


@contextmanager
def as_write_fault() -> Iterator[None]:
    """Raise a write of ours that this machine refused now (an OSError EROFS, ENOSPC, EDQUOT
    or EIO, bare or inside a SpotrunError) as a LedgerWriteError; anything else as it is."""
    try:
        yield
    except LedgerWriteError:
        raise
    except (OSError, SpotrunError) as exc:
        fault = _os_fault(exc)
        if fault is None:
            raise
        what = f"cannot write {fault.filename}" if fault.filename else "this machine cannot write"
        raise LedgerWriteError(
            f"{what} now ({fault.strerror or fault})",
            hint="its disk is read-only, full or failing; the run waits until it can be written",
        ) from exc


class WriteFaultGaveWay(LedgerWriteError):
    """A write fault waited out past its bound: the controller gives way. It carries the fault
    to the fresh controller, so that the one that writes again records it in the run."""

    def __init__(self, message: str, *, hint: str | None, fault: str, began_at: float) -> None:
        super().__init__(message, hint=hint)
        self.fault = fault
        self.began_at = began_at  # wall time of the first failed write


class WriteFaultWait:
    """One run's wait for this machine to write again: since when, and its bound."""

    def __init__(self, ledger: Ledger, run_id: str, *, clock: Clock) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.clock = clock
        self.since: float | None = None  # this controller's wait (monotonic), for the bound
        self.fault: str | None = None  # the fault, perhaps met by a controller before this one
        self.began_at = 0.0  # when it was first met (wall time)
        self.reported_at = 0.0
        self.tries = 0

    def inherit(self, fault: str, began_at: float) -> None:
        """A fault met before this controller drove the run (by the one it replaced, or while
        naming itself): recorded in the run once a write works."""
        if self.fault is None:
            self.fault, self.began_at = fault, began_at

    def wait(self, exc: LedgerWriteError) -> None:
        """Pause before the step is tried again; past the bound, raise: the controller gives
        way (its instances go on)."""
        now = self.clock.monotonic()
        bound_s = self.ledger.settings.ledger_write_wait_s
        if self.since is None:
            self.since, self.tries = now, 0
            self.inherit(exc.user_message(), time.time())
            self._report(f"cannot write, waiting up to {bound_s:.0f} s: {exc.user_message()}", now)
            self._record(f"waiting (up to {bound_s:.0f} s): {exc.user_message()}")
        elif now - self.reported_at >= REPORT_EVERY_S:
            self._report(f"still cannot write after {now - self.since:.0f} s: {exc.message}", now)
        if now - self.since >= bound_s:
            self._report(f"gives way after {now - self.since:.0f} s: {exc.message}", now)
            raise WriteFaultGaveWay(
                f"{exc.message}; the controller waited {now - self.since:.0f} s for it and "
                "gives way to a fresh one (the run's instances go on)",
                hint=exc.hint,
                fault=self.fault or exc.user_message(),
                began_at=self.began_at,
            ) from exc
        pause(min(FIRST_PAUSE_S * 2**self.tries, LONGEST_PAUSE_S), clock=self.clock)
        self.tries += 1

    def cleared(self) -> None:
        """A step wrote what it had to: if a fault was being waited out, it has passed."""
        if self.fault is None:
            return
        waited_s = max(0.0, time.time() - self.began_at)
        # Into the run's history, where `spotrun status` shows it (raises while still faulty)
        self.ledger.add_event(
            self.run_id,
            "disk",
            f"this machine could not write for {waited_s:.0f} s ({self.fault}); the run went on",
        )
        self.since, self.fault = None, None
        print(f"run {self.run_id}: writes work again after {waited_s:.0f} s", flush=True)

    def _report(self, line: str, now: float) -> None:
        self.reported_at = now
        print(f"run {self.run_id}: {line}", flush=True)

    def _record(self, message: str) -> None:
        """An event while it lasts, where the ledger itself can still be written."""
        try:
            self.ledger.add_event(self.run_id, "disk", message)
        except LedgerWriteError as exc:
            print(f"run {self.run_id}: not recorded in the ledger: {exc.message}", flush=True)
