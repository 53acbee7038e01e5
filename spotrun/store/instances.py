"""The instances table: every instance a run had, as the cloud last described it. A part of the
Ledger (spotrun.store.ledger), sharing its connection."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from spotrun.cloud.ranking import Pool, PoolHistory
from spotrun.store.connection import LedgerDatabase
from spotrun.store.run_records import InstanceRecord


class InstanceTable(LedgerDatabase):
    """The ledger's instances."""

    def upsert_instance(self, inst: InstanceRecord) -> None:
        with self.write() as db:
            db.execute(
                "INSERT INTO instances (id, run_id, provider, region, zone, instance_type, market, "
                "node_index, address, state, launched_at, terminated_at, end_reason, details_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET address = COALESCE(excluded.address, address), "
                "state = excluded.state, "
                "launched_at = COALESCE(excluded.launched_at, launched_at), "
                "terminated_at = COALESCE(excluded.terminated_at, terminated_at), "
                "end_reason = COALESCE(excluded.end_reason, end_reason), "
                # an upsert without details keeps those recorded (e.g. data volumes)
                "details_json = CASE WHEN excluded.details_json = '{}' THEN details_json "
                "ELSE excluded.details_json END",
                (
                    inst.id,
                    inst.run_id,
                    inst.provider,
                    inst.region,
                    inst.zone,
                    inst.instance_type,
                    inst.market,
                    inst.node_index,
                    inst.address,
                    inst.state,
                    inst.launched_at,
                    inst.terminated_at,
                    inst.end_reason,
                    json.dumps(inst.details),
                ),
            )

    def instances(self, run_id: str | None = None) -> list[InstanceRecord]:
        if run_id is None:
            rows = self._db.execute("SELECT * FROM instances ORDER BY launched_at")
        else:
            rows = self._db.execute(
                "SELECT * FROM instances WHERE run_id = ? ORDER BY launched_at, node_index",
                (run_id,),
            )
        return [
            InstanceRecord(
                id=r["id"],
                run_id=r["run_id"],
                provider=r["provider"],
                instance_type=r["instance_type"],
                market=r["market"],
                state=r["state"],
                region=r["region"],
                zone=r["zone"],
                node_index=r["node_index"],
                address=r["address"],
                launched_at=r["launched_at"],
                terminated_at=r["terminated_at"],
                end_reason=r["end_reason"],
                details=json.loads(r["details_json"] or "{}"),
            )
            for r in rows
        ]

    def pool_history(
        self, reclaim_codes: Sequence[str], since: float, now: float | None = None
    ) -> dict[Pool, PoolHistory]:
        """Per (instance type, zone): the spot instances launched since `since`, how many
        ended with one of `reclaim_codes` in their end reason (EC2 reclaimed them), and the
        hours they ran (a live one up to `now`)."""
        now = time.time() if now is None else now
        reclaimed = " OR ".join("instr(COALESCE(end_reason, ''), ?) > 0" for _ in reclaim_codes)
        rows = self._db.execute(
            f"SELECT instance_type, zone, SUM(CASE WHEN {reclaimed or '0'} THEN 1 ELSE 0 END) "
            "AS reclaims, SUM(MAX(0, COALESCE(terminated_at, ?) - launched_at)) / 3600.0 AS hours "
            "FROM instances WHERE market = 'spot' AND launched_at >= ? AND zone IS NOT NULL "
            "GROUP BY instance_type, zone",
            (*reclaim_codes, now, since),
        )
        return {
            (r["instance_type"], r["zone"]): PoolHistory(int(r["reclaims"]), float(r["hours"]))
            for r in rows
        }
