"""The controller's postman: every second, the messages that are due are sent, one attempt
each (spotrun.notify.senders, short timeouts), each attempt recorded; a failed one is tried
again with backoff (spotrun.notify.backoff). It runs in a thread of its own, with its own
ledger connection, so a slow target never holds a run's controller."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time

from spotrun.core.config import Settings
from spotrun.core.errors import SpotrunError
from spotrun.notify import backoff
from spotrun.notify.queue import GAVE_UP, PENDING, SENT, Message, due, pending_count, record_attempt
from spotrun.notify.senders import send
from spotrun.notify.target_file import load_target
from spotrun.store.ledger import Ledger

log = logging.getLogger(__name__)

LOOK_S = 1.0  # how often the outbox is looked at


def deliver_due(ledger: Ledger, now: float | None = None) -> int:
    """One attempt at every message that is due; how many were sent."""
    sent = 0
    for message in due(ledger, time.time() if now is None else now):
        sent += _attempt(ledger, message)
    return sent


def deliver_once(ledger: Ledger) -> None:
    """deliver_due for a process about to exit: what fails waits in the outbox for the home's
    controller, and nothing raises."""
    try:
        deliver_due(ledger)
    except (SpotrunError, sqlite3.Error) as exc:
        log.warning("notifications not delivered now: %s", exc)


def _attempt(ledger: Ledger, message: Message) -> int:
    try:
        target = load_target(ledger.home, message.target_id)
        if target is None:
            record_attempt(
                ledger, message, state=GAVE_UP, error="the target is no longer kept", next_at=None
            )
            return 0
        send(target, message.fields)
    except SpotrunError as exc:  # the senders' errors are masked already
        failed = message.attempts + 1
        first_s = ledger.settings.notify_retry_first_s
        next_at = backoff.next_try_at(message.created_at, time.time(), failed, first_s)
        state = PENDING if next_at is not None else GAVE_UP
        log.info("notification %d to %s: %s", message.id, message.target_label, exc.message)
        record_attempt(ledger, message, state=state, error=exc.message, next_at=next_at)
        return 0
    record_attempt(ledger, message, state=SENT, error=None, next_at=None)
    log.info("notification %d (%s) sent to %s", message.id, message.event, message.target_label)
    return 1


class OutboxWorker(threading.Thread):
    """Delivers the home's notifications until stopped."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(name="notify-outbox", daemon=True)
        self.settings = settings
        self.stopping = threading.Event()
        self.pending = 0  # what the last look left waiting: the controller stays for it

    def run(self) -> None:
        ledger = self._open()
        if ledger is None:
            return
        try:
            while not self.stopping.is_set():
                deliver_once(ledger)
                try:
                    self.pending = pending_count(ledger)
                except (SpotrunError, sqlite3.Error) as exc:  # the ledger: look again later
                    log.warning("notifications not counted now: %s", exc)
                self.stopping.wait(LOOK_S)
        finally:
            ledger.close()

    def _open(self) -> Ledger | None:
        """The worker's own connection, once the ledger can be opened (None: stopped first)."""
        while not self.stopping.is_set():
            try:
                return Ledger(self.settings)
            except (SpotrunError, sqlite3.Error) as exc:  # e.g. a read-only home: wait it out
                log.warning("notifications wait for the ledger: %s", exc)
                self.stopping.wait(LOOK_S * 10)
        return None

    def stop(self) -> None:
        self.stopping.set()
