"""Price history through the ledger's cache: fetched once per span, reaching back before the
start, clear errors when empty; and the ledger's v1 -> v2 migration."""

from __future__ import annotations

import sqlite3
from fractions import Fraction as F
from pathlib import Path

import pytest

from spotlab.prices import ConstructedPrices, utc
from spotrun.core.config import load_settings
from spotrun.core.errors import LedgerError, PricingError
from spotrun.cost.prices import LOOKBACKS_S, PriceBook, PriceSource, missing_spans
from spotrun.store.ledger import SCHEMA_VERSION, Ledger
from spotrun.store.price_cache import PriceCache

T0 = utc("2025-03-10 09:00:00")
TYPE, ZONE, REGION = "g5.xlarge", "us-east-1a", "us-east-1"


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(load_settings(tmp_path / "home"))


def prices() -> ConstructedPrices:
    source = ConstructedPrices(on_demand={TYPE: 1.006})
    source.add(ZONE, TYPE, [(T0 - 3 * 86400, 0.40), (T0 + 2232, 0.52), (T0 + 4500, 0.37)])
    return source


class WindowOnly(ConstructedPrices):
    """A source that returns only the changes inside the window (not the one before it)."""

    def spot_price_history(
        self, region: str, zone: str, instance_type: str, start: float, end: float
    ) -> list[tuple[float, float]]:
        points = super().spot_price_history(region, zone, instance_type, start, end)
        return [p for p in points if p[0] >= start]


def test_constructed_source_is_a_price_source() -> None:
    assert isinstance(prices(), PriceSource)


def test_missing_spans() -> None:
    assert missing_spans([], 0, 10) == [(0, 10)]
    assert missing_spans([(0, 10)], 2, 8) == []
    assert missing_spans([(2, 4), (6, 8)], 0, 10) == [(0, 2), (4, 6), (8, 10)]
    assert missing_spans([(0, 5), (4, 12)], 0, 10) == []


def test_history_is_fetched_once_and_then_read_from_the_ledger(ledger: Ledger) -> None:
    source = prices()
    book = PriceBook(ledger, lambda name: source)
    h = book.spot_history("aws", REGION, ZONE, TYPE, T0, T0 + 7200)
    assert h.steps == ((T0 - 3 * 86400, F("0.4")), (T0 + 2232, F("0.52")), (T0 + 4500, F("0.37")))
    assert source.requests == [(REGION, ZONE, TYPE, T0 - LOOKBACKS_S[0], T0 + 7200)]
    assert PriceCache(ledger).price_coverage(REGION, ZONE, TYPE) == [
        (T0 - LOOKBACKS_S[0], T0 + 7200)
    ]

    again = PriceBook(ledger, lambda name: source).spot_history(
        "aws", REGION, ZONE, TYPE, T0 + 100, T0 + 7000
    )
    assert again.steps == h.steps
    assert len(source.requests) == 1  # all from the cache

    # a later end (a live instance) fetches only the gap
    book.spot_history("aws", REGION, ZONE, TYPE, T0, T0 + 9000)
    assert source.requests[-1] == (REGION, ZONE, TYPE, T0 + 7200, T0 + 9000)
    assert PriceCache(ledger).price_coverage(REGION, ZONE, TYPE) == [
        (T0 - LOOKBACKS_S[0], T0 + 9000)
    ]


def test_lookback_widens_until_a_price_in_force_at_the_start_is_found(ledger: Ledger) -> None:
    source = WindowOnly(on_demand={TYPE: 1.006})
    source.add(ZONE, TYPE, [(T0 - 3 * 86400, 0.40), (T0 + 2232, 0.52)])
    h = PriceBook(ledger, lambda name: source).spot_history(
        "aws", REGION, ZONE, TYPE, T0, T0 + 3600
    )
    assert h.price_at(T0) == F("0.4")
    starts = [r[3] for r in source.requests]
    # 1 h back, then 1 day, then 7 days: each request only the part not yet held
    assert starts == [T0 - 3600, T0 - 86400, T0 - 7 * 86400]
    assert [r[4] for r in source.requests] == [T0 + 3600, T0 - 3600, T0 - 86400]


def test_empty_history_is_a_clear_error(ledger: Ledger) -> None:
    source = ConstructedPrices()
    book = PriceBook(ledger, lambda name: source)
    with pytest.raises(PricingError, match="history of g5.xlarge in us-east-1a .* is empty"):
        book.spot_history("aws", REGION, ZONE, TYPE, T0, T0 + 3600)
    assert PriceCache(ledger).price_points(REGION, ZONE, TYPE) == []


def test_history_starting_after_the_instance_is_a_clear_error(ledger: Ledger) -> None:
    source = WindowOnly()
    source.add(ZONE, TYPE, [(T0 + 60, 0.4)])
    with pytest.raises(PricingError, match="no spot price .* at or before 2025-03-10 09:00:00"):
        PriceBook(ledger, lambda name: source).spot_history("aws", REGION, ZONE, TYPE, T0, T0 + 600)


def test_without_a_source_only_a_full_cache_will_do(ledger: Ledger) -> None:
    with pytest.raises(PricingError, match="no aws price source is at hand"):
        PriceBook(ledger).spot_history("aws", REGION, ZONE, TYPE, T0, T0 + 600)
    source = prices()
    PriceBook(ledger, lambda name: source).spot_history("aws", REGION, ZONE, TYPE, T0, T0 + 600)
    cached = PriceBook(ledger).spot_history("aws", REGION, ZONE, TYPE, T0, T0 + 600)
    assert cached.price_at(T0) == F("0.4")
    with pytest.raises(PricingError, match="no aws price source"):
        PriceBook(ledger).spot_history("aws", REGION, ZONE, TYPE, T0, T0 + 6000)
    # offline (live figures): the last cached price is taken to hold since
    live = PriceBook(ledger).spot_history("aws", REGION, ZONE, TYPE, T0, T0 + 6000, offline=True)
    assert live.steps[-1] == (T0 - 3 * 86400, F("0.4"))


def test_source_construction_error_is_named(ledger: Ledger) -> None:
    from spotrun.core.errors import CloudError

    def broken(name: str) -> PriceSource | None:
        raise CloudError("no AWS credentials found")

    with pytest.raises(PricingError, match="no AWS credentials found"):
        PriceBook(ledger, broken).spot_history("aws", REGION, ZONE, TYPE, T0, T0 + 600)


def test_on_demand_prices_are_cached(ledger: Ledger) -> None:
    source = prices()
    book = PriceBook(ledger, lambda name: source)
    assert book.on_demand("aws", REGION, TYPE) == F("1.006")
    assert book.on_demand("aws", REGION, TYPE) == F("1.006")
    assert book.on_demand("aws", REGION, "x9.huge") is None
    assert book.on_demand("aws", REGION, "x9.huge") is None
    assert source.on_demand_requests == [(REGION, TYPE), (REGION, "x9.huge")]
    assert PriceBook(ledger).on_demand("aws", REGION, TYPE, offline=True) == F("1.006")


def test_price_now_is_the_latest_change(ledger: Ledger) -> None:
    source = prices()
    book = PriceBook(ledger, lambda name: source)
    assert book.price_now("aws", REGION, ZONE, TYPE, T0 + 3000) == F("0.52")


# ------------------------------------------------------------------ migration
V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, recipe TEXT NOT NULL,
    cloud TEXT NOT NULL, state TEXT NOT NULL, created_at REAL NOT NULL, started_at REAL,
    ended_at REAL, spec_json TEXT NOT NULL, plan_json TEXT, run_dir TEXT NOT NULL,
    last_metrics_json TEXT, message TEXT, sweep_id TEXT, supervisor_pid INTEGER,
    stop_requested INTEGER NOT NULL DEFAULT 0);
CREATE TABLE transitions (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id),
    from_state TEXT, to_state TEXT NOT NULL, at REAL NOT NULL, reason TEXT);
CREATE TABLE instances (id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id),
    provider TEXT NOT NULL, region TEXT, zone TEXT, instance_type TEXT NOT NULL,
    market TEXT NOT NULL, node_index INTEGER NOT NULL DEFAULT 0, address TEXT,
    state TEXT NOT NULL, launched_at REAL, terminated_at REAL, end_reason TEXT,
    details_json TEXT);
CREATE TABLE events (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id),
    at REAL NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL);
CREATE TABLE cost_lines (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id),
    instance_id TEXT, kind TEXT NOT NULL, quantity REAL NOT NULL, unit TEXT NOT NULL,
    usd REAL NOT NULL, on_demand_usd REAL, method TEXT NOT NULL, computed_at REAL NOT NULL);
CREATE TABLE price_points (region TEXT NOT NULL, zone TEXT NOT NULL,
    instance_type TEXT NOT NULL, at REAL NOT NULL, usd_per_hour REAL NOT NULL,
    PRIMARY KEY (region, zone, instance_type, at));
INSERT INTO meta VALUES ('app', 'spotrun-ledger'), ('schema_version', '1');
"""


def _v1_ledger(home: Path) -> Path:
    home.mkdir(parents=True)
    path = home / "ledger.db"
    with sqlite3.connect(path) as db:
        db.executescript(V1_SCHEMA)
        db.execute(
            "INSERT INTO runs (id, name, recipe, cloud, state, created_at, spec_json, run_dir) "
            "VALUES ('abc123abc123', 'old-run', 'digits-fast', 'local', 'succeeded', 1.0, "
            "'{\"recipe\": \"digits-fast\"}', '/nonexistent')"
        )
        db.execute(
            "INSERT INTO cost_lines (run_id, kind, quantity, unit, usd, method, computed_at) "
            "VALUES ('abc123abc123', 'compute', 3600, 'instance-s', 0.4456, 'old', 1.0)"
        )
        db.execute("INSERT INTO price_points VALUES ('us-east-1', 'z', 't', 5.0, 0.4)")
    return path


def test_a_v1_ledger_is_migrated_and_keeps_what_it_holds(tmp_path: Path) -> None:
    path = _v1_ledger(tmp_path / "home")
    ledger = Ledger(load_settings(tmp_path / "home"))
    assert SCHEMA_VERSION >= 2  # v1 -> v2 -> ... the latest
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),)
    (line,) = ledger.cost_lines("abc123abc123")
    assert line.usd_exact is None and line.amount == F("0.4456")
    assert ledger.run_cost_exact("abc123abc123") == F("0.4456")
    assert PriceCache(ledger).price_points("us-east-1", "z", "t") == [(5.0, 0.4)]
    assert ledger.get_run("abc123abc123").name == "old-run"
    # the new tables work
    PriceCache(ledger).store_price_points("us-east-1", "z", "t", [(9.0, 0.5)], covered=(0.0, 10.0))
    assert PriceCache(ledger).price_coverage("us-east-1", "z", "t") == [(0.0, 10.0)]
    PriceCache(ledger).store_on_demand_price("us-east-1", "t", 1.5)
    assert PriceCache(ledger).on_demand_price("us-east-1", "t") is not None
    ledger.close()
    Ledger(load_settings(tmp_path / "home")).close()  # opening again is a no-op


def test_a_newer_ledger_is_refused(tmp_path: Path) -> None:
    path = _v1_ledger(tmp_path / "home")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(LedgerError, match="newer spotrun"):
        Ledger(load_settings(tmp_path / "home"))


def test_coverage_spans_merge(ledger: Ledger) -> None:
    for span in [(0.0, 10.0), (20.0, 30.0), (5.0, 22.0), (40.0, 50.0)]:
        PriceCache(ledger).store_price_points(REGION, ZONE, TYPE, [], covered=span)
    assert PriceCache(ledger).price_coverage(REGION, ZONE, TYPE) == [(0.0, 30.0), (40.0, 50.0)]
