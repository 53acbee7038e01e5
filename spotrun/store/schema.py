"""The ledger's tables: the schema of a new ledger, and the steps that bring an older one up to
it (each takes a ledger of the version before to its own)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from spotrun.core.errors import LedgerError
from spotrun.core.rundir import HOME_VAR

SCHEMA_VERSION = 5
APP_ID = "spotrun-ledger"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    recipe TEXT NOT NULL,
    cloud TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    spec_json TEXT NOT NULL,
    plan_json TEXT,
    run_dir TEXT NOT NULL,
    last_metrics_json TEXT,
    message TEXT,
    sweep_id TEXT,
    supervisor_pid INTEGER,
    stop_requested INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS transitions (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    from_state TEXT,
    to_state TEXT NOT NULL,
    at REAL NOT NULL,
    reason TEXT
);
CREATE INDEX IF NOT EXISTS transitions_by_run ON transitions(run_id, id);
CREATE TABLE IF NOT EXISTS instances (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    provider TEXT NOT NULL,
    region TEXT,
    zone TEXT,
    instance_type TEXT NOT NULL,
    market TEXT NOT NULL,
    node_index INTEGER NOT NULL DEFAULT 0,
    address TEXT,
    state TEXT NOT NULL,
    launched_at REAL,
    terminated_at REAL,
    end_reason TEXT,
    details_json TEXT
);
CREATE INDEX IF NOT EXISTS instances_by_run ON instances(run_id);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_run ON events(run_id, id);
CREATE TABLE IF NOT EXISTS cost_lines (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    instance_id TEXT,
    kind TEXT NOT NULL,
    quantity REAL NOT NULL,
    unit TEXT NOT NULL,
    usd REAL NOT NULL,
    on_demand_usd REAL,
    method TEXT NOT NULL,
    computed_at REAL NOT NULL,
    usd_exact TEXT,
    on_demand_usd_exact TEXT,
    start_at REAL,
    end_at REAL
);
CREATE INDEX IF NOT EXISTS cost_lines_by_run ON cost_lines(run_id);
CREATE TABLE IF NOT EXISTS price_points (
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    at REAL NOT NULL,
    usd_per_hour REAL NOT NULL,
    PRIMARY KEY (region, zone, instance_type, at)
);
CREATE TABLE IF NOT EXISTS price_coverage (
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    start_at REAL NOT NULL,
    end_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS price_coverage_by_series ON price_coverage(region, zone, instance_type);
CREATE TABLE IF NOT EXISTS on_demand_prices (
    region TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    usd_per_hour REAL,
    fetched_at REAL NOT NULL,
    PRIMARY KEY (region, instance_type)
);
"""

# v3 (sweeps): a sweep, its trials (each becomes a run), and packs: instances a sweep shares
# between trials, one GPU each, with every share a trial had of one (what splits their cost).
# Python calls `packs.slots` trials_per_instance and a `pack_stays` row a Share (its `seat_id`
# the share's id): the table and column names are kept for existing ledgers.
SWEEP_SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    recipe TEXT NOT NULL,
    cloud TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    ended_at REAL,
    spec_json TEXT NOT NULL,
    plan_json TEXT,
    message TEXT,
    supervisor_pid INTEGER,
    stop_requested INTEGER NOT NULL DEFAULT 0,
    sweep_dir TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sweep_trials (
    sweep_id TEXT NOT NULL REFERENCES sweeps(id),
    idx INTEGER NOT NULL,
    params_json TEXT NOT NULL,
    run_id TEXT REFERENCES runs(id),
    status TEXT NOT NULL,
    reason TEXT,
    pack_id TEXT,
    PRIMARY KEY (sweep_id, idx)
);
CREATE INDEX IF NOT EXISTS sweep_trials_by_run ON sweep_trials(run_id);
CREATE TABLE IF NOT EXISTS packs (
    id TEXT PRIMARY KEY,
    sweep_id TEXT NOT NULL REFERENCES sweeps(id),
    offer_json TEXT NOT NULL,
    slots INTEGER NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    ended_at REAL
);
CREATE TABLE IF NOT EXISTS pack_instances (
    id TEXT PRIMARY KEY,
    pack_id TEXT NOT NULL REFERENCES packs(id),
    provider TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    market TEXT NOT NULL,
    region TEXT,
    zone TEXT,
    launched_at REAL,
    terminated_at REAL,
    end_reason TEXT
);
CREATE TABLE IF NOT EXISTS pack_stays (
    id INTEGER PRIMARY KEY,
    pack_id TEXT NOT NULL REFERENCES packs(id),
    instance_id TEXT NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs(id),
    gpu_index INTEGER NOT NULL,
    seat_id TEXT NOT NULL UNIQUE,
    joined_at REAL NOT NULL,
    left_at REAL
);
CREATE INDEX IF NOT EXISTS pack_stays_by_instance ON pack_stays(instance_id);
CREATE INDEX IF NOT EXISTS pack_stays_by_run ON pack_stays(run_id);
"""

# v4 (notifications, spotrun.notify): who is told of a run's or sweep's news (a target by its
# id; the target itself, a secret, lives in a 0600 file under SPOTRUN_HOME), the messages
# waiting to be sent or sent, and every attempt to send one.
NOTIFY_SCHEMA = """
CREATE TABLE IF NOT EXISTS notify_subscriptions (
    subject_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    target_label TEXT NOT NULL,
    events TEXT NOT NULL,
    PRIMARY KEY (subject_id, target_id)
);
CREATE TABLE IF NOT EXISTS notify_outbox (
    id INTEGER PRIMARY KEY,
    subject_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    target_label TEXT NOT NULL,
    event TEXT NOT NULL,
    fields_json TEXT NOT NULL,
    created_at REAL NOT NULL,
    next_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    sent_at REAL
);
CREATE INDEX IF NOT EXISTS notify_outbox_due ON notify_outbox(state, next_at);
CREATE TABLE IF NOT EXISTS notify_attempts (
    id INTEGER PRIMARY KEY,
    message_id INTEGER NOT NULL REFERENCES notify_outbox(id),
    at REAL NOT NULL,
    outcome TEXT NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS notify_attempts_by_message ON notify_attempts(message_id);
"""

# v5 (PBT): each population-based trial's start: whose checkpoint (its step and SHA-256) it
# copied, and its values before and after the explore step.
PBT_SCHEMA = """
CREATE TABLE IF NOT EXISTS pbt_lineage (
    sweep_id TEXT NOT NULL REFERENCES sweeps(id),
    idx INTEGER NOT NULL,
    member INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    parent_idx INTEGER NOT NULL,
    exploited INTEGER NOT NULL,
    checkpoint TEXT,
    step INTEGER,
    sha256 TEXT,
    parent_value REAL,
    params_before_json TEXT NOT NULL,
    params_after_json TEXT NOT NULL,
    PRIMARY KEY (sweep_id, idx)
);
"""

# Each step takes a ledger of the version before it to its own version; a fresh ledger gets
# SCHEMA (the latest) directly.
MIGRATIONS: dict[int, str] = {
    # v2: exact amounts and billed periods on cost lines; which spans of spot price history
    # the cache holds in full; cached on-demand prices.
    2: """
ALTER TABLE cost_lines ADD COLUMN usd_exact TEXT;
ALTER TABLE cost_lines ADD COLUMN on_demand_usd_exact TEXT;
ALTER TABLE cost_lines ADD COLUMN start_at REAL;
ALTER TABLE cost_lines ADD COLUMN end_at REAL;
CREATE TABLE IF NOT EXISTS price_coverage (
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    start_at REAL NOT NULL,
    end_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS price_coverage_by_series ON price_coverage(region, zone, instance_type);
CREATE TABLE IF NOT EXISTS on_demand_prices (
    region TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    usd_per_hour REAL,
    fetched_at REAL NOT NULL,
    PRIMARY KEY (region, instance_type)
);
""",
    3: SWEEP_SCHEMA,
    4: NOTIFY_SCHEMA,
    5: PBT_SCHEMA,
}


def run_script(db: sqlite3.Connection, script: str) -> None:
    """Statements one by one: executescript would commit the open transaction."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def is_current(db: sqlite3.Connection) -> bool:
    """Whether the ledger is spotrun's at SCHEMA_VERSION, read without a write lock, so that
    opening an up-to-date ledger (to read pool history, say) never waits for a writer."""
    try:
        rows = dict(db.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.OperationalError:  # no meta table: a new ledger, migrate makes it
        return False
    return rows.get("app") == APP_ID and rows.get("schema_version") == str(SCHEMA_VERSION)


def migrate(db: sqlite3.Connection, where: Path) -> None:
    """Bring the ledger at `where` to SCHEMA_VERSION, inside the caller's write transaction: a new
    one gets SCHEMA, an older one each step after its version; refuse another app's file and a
    newer spotrun's ledger."""
    has_meta = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    version = 0  # a new ledger
    if has_meta:
        rows = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if rows and rows.get("app") != APP_ID:
            raise LedgerError(
                f"{where} is an SQLite file but not a spotrun ledger",
                hint=f"point {HOME_VAR} elsewhere or move the file aside",
            )
        try:
            version = int(rows.get("schema_version", "0"))
        except ValueError:
            raise LedgerError(
                f"{where} has a schema version that is not a number "
                f"({rows.get('schema_version')!r})",
                hint=f"move it aside (mv {where} {where}.bad) and spotrun starts a new one",
            ) from None
        if version > SCHEMA_VERSION:
            raise LedgerError(
                f"{where} was written by a newer spotrun (ledger schema v{version}; "
                f"this spotrun reads up to v{SCHEMA_VERSION})",
                hint="upgrade spotrun (pip install -U spotrun)",
            )
        if version == SCHEMA_VERSION:
            return
    if version == 0:
        run_script(db, SCHEMA)
        run_script(db, SWEEP_SCHEMA)
        run_script(db, NOTIFY_SCHEMA)
        run_script(db, PBT_SCHEMA)
    else:  # an older ledger: step it up, keeping everything it holds
        for step in range(version + 1, SCHEMA_VERSION + 1):
            run_script(db, MIGRATIONS[step])
    db.execute("INSERT OR REPLACE INTO meta VALUES ('app', ?)", (APP_ID,))
    db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
