"""The cache of spot price points, the spans it holds in full, and on-demand prices (tables
of the ledger): priced history is fetched once, whatever asks for it again."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from spotrun.store.ledger import Ledger


class PriceCache:
    """The ledger's price tables."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    @property
    def _db(self) -> sqlite3.Connection:
        return self.ledger.db

    def store_price_points(
        self,
        region: str,
        zone: str,
        instance_type: str,
        points: Sequence[tuple[float, float]],
        *,
        covered: tuple[float, float] | None = None,
    ) -> None:
        """Cache price points; `covered` says the cache now holds every point in that span."""
        with self.ledger.write() as db:
            db.executemany(
                "INSERT OR REPLACE INTO price_points VALUES (?, ?, ?, ?, ?)",
                [(region, zone, instance_type, at, usd) for at, usd in points],
            )
            if covered is None:
                return
            start, end = covered
            key = (region, zone, instance_type)
            touching = db.execute(
                "SELECT rowid, start_at, end_at FROM price_coverage WHERE region = ? AND zone = ? "
                "AND instance_type = ? AND end_at >= ? AND start_at <= ?",
                (*key, start, end),
            ).fetchall()
            for row in touching:  # merge into one span
                start, end = min(start, row["start_at"]), max(end, row["end_at"])
                db.execute("DELETE FROM price_coverage WHERE rowid = ?", (row["rowid"],))
            db.execute("INSERT INTO price_coverage VALUES (?, ?, ?, ?, ?)", (*key, start, end))

    def price_points(
        self,
        region: str,
        zone: str,
        instance_type: str,
        *,
        start: float | None = None,
        end: float | None = None,
    ) -> list[tuple[float, float]]:
        """Cached points in order; with start, only from the last one at or before it."""
        key = (region, zone, instance_type)
        where = "region = ? AND zone = ? AND instance_type = ?"
        params: list[Any] = list(key)
        if start is not None:
            where += (
                " AND at >= COALESCE((SELECT MAX(at) FROM price_points WHERE region = ? "
                "AND zone = ? AND instance_type = ? AND at <= ?), ?)"
            )
            params += [*key, start, start]
        if end is not None:
            where += " AND at <= ?"
            params.append(end)
        rows = self._db.execute(
            f"SELECT at, usd_per_hour FROM price_points WHERE {where} ORDER BY at", params
        )
        return [(r["at"], r["usd_per_hour"]) for r in rows]

    def price_coverage(
        self, region: str, zone: str, instance_type: str
    ) -> list[tuple[float, float]]:
        """Spans (start, end) over which the cache holds every price point, in order."""
        rows = self._db.execute(
            "SELECT start_at, end_at FROM price_coverage WHERE region = ? AND zone = ? "
            "AND instance_type = ? ORDER BY start_at",
            (region, zone, instance_type),
        )
        return [(r["start_at"], r["end_at"]) for r in rows]

    def store_on_demand_price(
        self, region: str, instance_type: str, usd_per_hour: float | None
    ) -> None:
        """Cache an on-demand price; None records that the source had none."""
        with self.ledger.write() as db:
            db.execute(
                "INSERT OR REPLACE INTO on_demand_prices VALUES (?, ?, ?, ?)",
                (region, instance_type, usd_per_hour, self.ledger.clock()),
            )

    def on_demand_price(self, region: str, instance_type: str) -> tuple[float | None, float] | None:
        """(price or None, when it was fetched), or None if it never was."""
        row = self._db.execute(
            "SELECT usd_per_hour, fetched_at FROM on_demand_prices WHERE region = ? "
            "AND instance_type = ?",
            (region, instance_type),
        ).fetchone()
        return None if row is None else (row["usd_per_hour"], row["fetched_at"])
