"""The ledger's outbox: who is told of what (subscriptions), the messages waiting or sent, and
every attempt to send one. Its tables are the ledger's (spotrun.store.schema, v4)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from spotrun.notify.targets import Target
from spotrun.store.ledger import Ledger

PENDING, SENT, GAVE_UP = "pending", "sent", "gave-up"


@dataclass(frozen=True)
class Subscription:
    target_id: str
    target_label: str
    events: frozenset[str]


@dataclass(frozen=True)
class Message:
    id: int
    subject_id: str
    target_id: str
    target_label: str
    event: str
    fields: dict[str, Any]
    created_at: float
    attempts: int
    state: str
    sent_at: float | None


@dataclass(frozen=True)
class Attempt:
    message_id: int
    at: float
    outcome: str
    error: str | None


def subscribe(
    ledger: Ledger, subject_id: str, targets: list[Target], events: tuple[str, ...]
) -> None:
    """Tell `targets` of `events` of the run or sweep `subject_id`."""
    with ledger.write() as db:
        db.executemany(
            "INSERT OR REPLACE INTO notify_subscriptions "
            "(subject_id, target_id, target_label, events) VALUES (?, ?, ?, ?)",
            [(subject_id, t.id, t.masked, ",".join(events)) for t in targets],
        )


def unsubscribe_all(ledger: Ledger, subject_id: str) -> None:
    """A launch that recorded nothing leaves no subscription behind."""
    with ledger.write() as db:
        db.execute("DELETE FROM notify_subscriptions WHERE subject_id = ?", (subject_id,))


def subscriptions(ledger: Ledger, subject_id: str) -> list[Subscription]:
    rows = ledger.db.execute(
        "SELECT target_id, target_label, events FROM notify_subscriptions WHERE subject_id = ?",
        (subject_id,),
    )
    return [
        Subscription(r["target_id"], r["target_label"], frozenset(r["events"].split(",")))
        for r in rows
    ]


def enqueue(ledger: Ledger, subject_id: str, event: str, fields: dict[str, Any]) -> int:
    """Queue one message per target that asked for `event`; how many were queued."""
    wanting = [s for s in subscriptions(ledger, subject_id) if event in s.events]
    if not wanting:
        return 0
    now = ledger.clock()
    with ledger.write() as db:
        db.executemany(
            "INSERT INTO notify_outbox (subject_id, target_id, target_label, event, fields_json, "
            "created_at, next_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    subject_id,
                    s.target_id,
                    s.target_label,
                    event,
                    json.dumps(fields),
                    now,
                    now,
                    PENDING,
                )
                for s in wanting
            ],
        )
    return len(wanting)


def due(ledger: Ledger, now: float, limit: int = 20) -> list[Message]:
    rows = ledger.db.execute(
        "SELECT * FROM notify_outbox WHERE state = ? AND next_at <= ? ORDER BY next_at LIMIT ?",
        (PENDING, now, limit),
    )
    return [_message(r) for r in rows]


def pending_count(ledger: Ledger) -> int:
    row = ledger.db.execute("SELECT COUNT(*) FROM notify_outbox WHERE state = ?", (PENDING,))
    return int(row.fetchone()[0])


def record_attempt(
    ledger: Ledger, message: Message, *, state: str, error: str | None, next_at: float | None
) -> None:
    """One attempt's outcome, and the message's new state (and next try, while pending)."""
    now = ledger.clock()
    outcome = "sent" if state == SENT else "failed"
    with ledger.write() as db:
        db.execute(
            "INSERT INTO notify_attempts (message_id, at, outcome, error) VALUES (?, ?, ?, ?)",
            (message.id, now, outcome, error),
        )
        db.execute(
            "UPDATE notify_outbox SET attempts = attempts + 1, state = ?, "
            "next_at = COALESCE(?, next_at), sent_at = ? WHERE id = ?",
            (state, next_at, now if state == SENT else None, message.id),
        )


def messages(ledger: Ledger, limit: int = 50) -> list[Message]:
    """The newest messages first."""
    rows = ledger.db.execute("SELECT * FROM notify_outbox ORDER BY id DESC LIMIT ?", (limit,))
    return [_message(r) for r in rows]


def attempts(ledger: Ledger, message_id: int) -> list[Attempt]:
    rows = ledger.db.execute(
        "SELECT message_id, at, outcome, error FROM notify_attempts WHERE message_id = ? "
        "ORDER BY id",
        (message_id,),
    )
    return [Attempt(r["message_id"], r["at"], r["outcome"], r["error"]) for r in rows]


def _message(row: Any) -> Message:
    return Message(
        id=row["id"],
        subject_id=row["subject_id"],
        target_id=row["target_id"],
        target_label=row["target_label"],
        event=row["event"],
        fields=json.loads(row["fields_json"]),
        created_at=row["created_at"],
        attempts=row["attempts"],
        state=row["state"],
        sent_at=row["sent_at"],
    )
