"""The events table: what happened to a run, in words, with its time. A part of the Ledger
(spotrun.store.ledger), sharing its connection."""

from __future__ import annotations

from spotrun.store.connection import LedgerDatabase
from spotrun.store.run_records import RunEvent


class EventTable(LedgerDatabase):
    """The ledger's run events."""

    def add_event(self, run_id: str, kind: str, message: str) -> None:
        with self.write() as db:
            db.execute(
                "INSERT INTO events (run_id, at, kind, message) VALUES (?, ?, ?, ?)",
                (run_id, self.clock(), kind, message),
            )

    def events(self, run_id: str) -> list[RunEvent]:
        rows = self._db.execute(
            "SELECT at, kind, message FROM events WHERE run_id = ? ORDER BY id", (run_id,)
        )
        return [RunEvent(r["at"], r["kind"], r["message"]) for r in rows]
