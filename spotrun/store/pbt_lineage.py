"""A population-based sweep's lineage (schema v5's pbt_lineage): for each trial after the first
generation, whose checkpoint it started from and its values before and after exploring."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from spotrun.store.ledger import Ledger


@dataclass(frozen=True)
class LineageRecord:
    sweep_id: str
    index: int  # the trial that started from the checkpoint
    member: int
    generation: int
    parent_index: int  # the trial whose checkpoint it copied: its member's last, or a donor's
    exploited: bool  # True: a better member's weights, its values explored
    checkpoint: str | None  # the file's name; None when the parent left none
    step: int | None
    sha256: str | None
    parent_value: float | None  # the parent's metric when it ended
    params_before: dict[str, str]  # the member's own values in the generation before
    params_after: dict[str, str]

    def source(self, epoch: int | None) -> str:
        """Where it came from, as `sweep status` shows it: t3@epoch2."""
        return f"t{self.parent_index}" + ("" if epoch is None else f"@epoch{epoch}")


class LineageStore:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def record(self, rec: LineageRecord) -> None:
        """Kept as first written: a restarted controller decides again, the same way."""
        with self.ledger.write() as db:
            db.execute(
                "INSERT OR IGNORE INTO pbt_lineage (sweep_id, idx, member, generation, "
                "parent_idx, exploited, checkpoint, step, sha256, parent_value, "
                "params_before_json, params_after_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rec.sweep_id,
                    rec.index,
                    rec.member,
                    rec.generation,
                    rec.parent_index,
                    int(rec.exploited),
                    rec.checkpoint,
                    rec.step,
                    rec.sha256,
                    rec.parent_value,
                    json.dumps(rec.params_before),
                    json.dumps(rec.params_after),
                ),
            )

    def of_sweep(self, sweep_id: str) -> dict[int, LineageRecord]:
        rows = self.ledger.db.execute(
            "SELECT * FROM pbt_lineage WHERE sweep_id = ? ORDER BY idx", (sweep_id,)
        )
        return {r["idx"]: _record(r) for r in rows}


def _record(row: sqlite3.Row) -> LineageRecord:
    return LineageRecord(
        sweep_id=row["sweep_id"],
        index=row["idx"],
        member=row["member"],
        generation=row["generation"],
        parent_index=row["parent_idx"],
        exploited=bool(row["exploited"]),
        checkpoint=row["checkpoint"],
        step=row["step"],
        sha256=row["sha256"],
        parent_value=row["parent_value"],
        params_before=json.loads(row["params_before_json"]),
        params_after=json.loads(row["params_after_json"]),
    )
