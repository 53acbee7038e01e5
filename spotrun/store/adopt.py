"""Run folders the ledger does not know, adopted back as runs.

A ledger can lose runs it held: SQLite drops every WAL frame from the first one whose checksum
fails (random bytes in ledger.db-wal), a ledger moved aside for damage starts empty. The run
folders under SPOTRUN_HOME/runs still say what ran: a folder with a job record (job.json) and
no row is a run the ledger forgot. It is recorded again, never left unseen: a job that ended
(exit.json) as succeeded or failed with its code; one that has not as running, so that the
controller drives it again (its provider finds the instance by the run's id; a run that has
lost its instance has no offers to replace it with, and fails saying so).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotrun.core.home import RUNS_FOLDER
from spotrun.core.lazy import lazy_module
from spotrun.core.rundir import EXIT_FILE, JOB_FILE, RECIPE_FILE
from spotrun.core.runstates import RunState
from spotrun.store.connection import LedgerDatabase

if TYPE_CHECKING:
    from spotrun.core import config, jobspec
    from spotrun.core.config import LaunchSpec
else:  # the launch models import pydantic (~100 ms); `ls` pays it only when it adopts a run
    config = lazy_module("spotrun.core.config")
    jobspec = lazy_module("spotrun.core.jobspec")

# `spotrun rm` removes the run's rows first, its folder after: a mark in between, so that the
# folder is not adopted back meanwhile (store.runs_admin.forget_run)
FORGOTTEN = "forgotten:"
RUN_ID = re.compile(r"[0-9a-f]{12}")  # store.run_records.new_run_id's shape
ADOPTED = "adopted back from its run folder: the ledger did not know it (a damaged ledger?)"


def forgotten_key(run_id: str) -> str:
    return FORGOTTEN + run_id


@dataclass(frozen=True)
class Adopted:
    run_id: str
    state: RunState


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _spec(run_dir: Path, job: dict[str, Any]) -> LaunchSpec:
    """What the folder says was launched: a recipe's name, or the command the job ran."""
    # A local run's job ran in this very folder; an instance's in its own home's copy.
    where = str(job.get("cwd") or job.get("checkpoint_dir") or "")
    cloud = "local" if where.startswith(str(run_dir)) else "aws"
    name = _json(run_dir / RECIPE_FILE).get("name")
    if isinstance(name, str) and name:
        return config.LaunchSpec(recipe=name, cloud=cloud)
    argv = job.get("argv")
    if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
        return config.LaunchSpec(recipe="cmd", cloud=cloud, job=jobspec.JobSpec(argv=argv))
    return config.LaunchSpec(recipe="cmd", cloud=cloud)


def _ended(run_dir: Path) -> tuple[RunState, str]:
    code = _json(run_dir / EXIT_FILE).get("exit_code")
    if not isinstance(code, int):
        return RunState.RUNNING, ADOPTED
    state = RunState.SUCCEEDED if code == 0 else RunState.FAILED
    return state, f"{ADOPTED}; job exited with code {code}"


def adopt_run_folders(db: LedgerDatabase) -> list[Adopted]:
    """Record every run folder with a job record and no row in the ledger; what was adopted."""
    runs = db.home / RUNS_FOLDER
    try:
        folders = sorted(p for p in runs.iterdir() if RUN_ID.fullmatch(p.name) and p.is_dir())
    except OSError:
        return []
    known = {row[0] for row in db.db.execute("SELECT id FROM runs")}
    known |= {
        str(row[0]).removeprefix(FORGOTTEN)
        for row in db.db.execute("SELECT key FROM meta WHERE key LIKE ?", (FORGOTTEN + "%",))
    }
    adopted = []
    for run_dir in folders:
        job = _json(run_dir / JOB_FILE)
        if run_dir.name in known or not job:
            continue  # a folder with no job record never ran (a launch cut short)
        adopted.append(_adopt(db, run_dir, _spec(run_dir, job)))
    return adopted


def _adopt(db: LedgerDatabase, run_dir: Path, spec: LaunchSpec) -> Adopted:
    state, reason = _ended(run_dir)
    run_id = run_dir.name
    started = _json(run_dir / JOB_FILE).get("started_at")
    now = db.clock()
    created = started if isinstance(started, (int, float)) else now
    ended = now if state is not RunState.RUNNING else None
    with db.write() as tx:
        if tx.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
            return Adopted(run_id, state)  # another process adopted it first
        tx.execute(
            "INSERT INTO runs (id, name, recipe, cloud, state, created_at, started_at, "
            "ended_at, message, spec_json, run_dir) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                f"{spec.recipe}-{run_id}",  # the id makes it unique; short names may be taken
                spec.recipe,
                spec.cloud,
                state.value,
                created,
                created,
                ended,
                reason if state is not RunState.RUNNING else None,
                spec.model_dump_json(),
                str(run_dir),
            ),
        )
        tx.execute(
            "INSERT INTO transitions (run_id, from_state, to_state, at, reason) "
            "VALUES (?, NULL, ?, ?, ?)",
            (run_id, state.value, now, reason),
        )
        tx.execute(
            "INSERT INTO events (run_id, at, kind, message) VALUES (?, ?, ?, ?)",
            (run_id, now, "ledger", ADOPTED),
        )
    return Adopted(run_id, state)
