"""The cost_lines table: each run's last computed charges, exact (spotrun.cost makes them). A
part of the Ledger (spotrun.store.ledger), sharing its connection."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from spotrun.store.connection import LedgerDatabase
from spotrun.store.run_records import CostLine, parse_fraction


class CostLineTable(LedgerDatabase):
    """The ledger's cost lines."""

    def replace_cost_lines(self, run_id: str, lines: Sequence[CostLine]) -> None:
        """Store a run's cost lines, replacing the previous computation (costs are recomputed)."""
        now = self.clock()
        with self.write() as db:
            db.execute("DELETE FROM cost_lines WHERE run_id = ?", (run_id,))
            db.executemany(
                "INSERT INTO cost_lines (run_id, instance_id, kind, quantity, unit, usd, "
                "on_demand_usd, method, computed_at, usd_exact, on_demand_usd_exact, start_at, "
                "end_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        line.run_id,
                        line.instance_id,
                        line.kind,
                        line.quantity,
                        line.unit,
                        line.usd,
                        line.on_demand_usd,
                        line.method,
                        now,
                        None if line.usd_exact is None else str(line.usd_exact),
                        None if line.on_demand_usd_exact is None else str(line.on_demand_usd_exact),
                        line.start_at,
                        line.end_at,
                    )
                    for line in lines
                ],
            )

    def cost_lines(self, run_id: str) -> list[CostLine]:
        rows = self._db.execute("SELECT * FROM cost_lines WHERE run_id = ? ORDER BY id", (run_id,))
        return [
            CostLine(
                run_id=r["run_id"],
                kind=r["kind"],
                quantity=r["quantity"],
                unit=r["unit"],
                usd=r["usd"],
                method=r["method"],
                instance_id=r["instance_id"],
                on_demand_usd=r["on_demand_usd"],
                usd_exact=parse_fraction(r["usd_exact"]),
                on_demand_usd_exact=parse_fraction(r["on_demand_usd_exact"]),
                start_at=r["start_at"],
                end_at=r["end_at"],
            )
            for r in rows
        ]

    def run_cost_exact(self, run_id: str) -> Fraction:
        """The sum of the run's stored lines, exact (lines from before v2 count as stored)."""
        return sum((line.amount for line in self.cost_lines(run_id)), Fraction(0))

    def run_cost_usd(self, run_id: str) -> float:
        return float(self.run_cost_exact(run_id))
