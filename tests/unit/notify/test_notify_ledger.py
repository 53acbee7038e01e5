"""The outbox's tables: a v3 ledger gains them, and a message goes from queued to sent with
each attempt recorded."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from spotrun.core.config import load_settings
from spotrun.notify import queue
from spotrun.notify.targets import parse_target
from spotrun.store.ledger import SCHEMA_VERSION, Ledger

NOTIFY_TABLES = ("notify_attempts", "notify_outbox", "notify_subscriptions")


def test_a_v3_ledger_gains_the_outbox_and_a_message_is_queued_tried_and_sent(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    with Ledger(load_settings(home)):  # made at the latest version; take it back to v3
        pass
    with sqlite3.connect(home / "ledger.db") as db:
        for table in NOTIFY_TABLES:
            db.execute(f"DROP TABLE {table}")
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    assert SCHEMA_VERSION >= 4
    target = parse_target("webhook:https://example.com/hook/s3cret")
    with Ledger(load_settings(home)) as ledger:
        queue.subscribe(ledger, "run1", [target], ("failed",))
        assert queue.enqueue(ledger, "run1", "succeeded", {}) == 0  # not asked for
        assert queue.enqueue(ledger, "run1", "failed", {"reason": "code 3"}) == 1
        (message,) = queue.due(ledger, now=ledger.clock())
        queue.record_attempt(ledger, message, state=queue.PENDING, error="refused", next_at=1e12)
        assert queue.due(ledger, now=ledger.clock()) == []  # waits for its next try
        assert queue.pending_count(ledger) == 1
        queue.record_attempt(ledger, message, state=queue.SENT, error=None, next_at=None)
        (sent,) = queue.messages(ledger)
        assert (sent.state, sent.attempts, sent.fields) == ("sent", 2, {"reason": "code 3"})
        outcomes = [(a.outcome, a.error) for a in queue.attempts(ledger, sent.id)]
        assert outcomes == [("failed", "refused"), ("sent", None)]
    with sqlite3.connect(home / "ledger.db") as db:
        dumped = "\n".join(db.iterdump())
    assert "s3cret" not in dumped and target.masked in dumped
