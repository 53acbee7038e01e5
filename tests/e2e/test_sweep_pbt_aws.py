"""A PBT sweep in the lab (a population of 2, two generations of an epoch, one trial at a time,
each on an instance of its own) whose controller is killed once the second generation has
begun: the next command's controller keeps the recorded decisions (one lineage row per trial,
as first written) and the copied member's run starts on its own instance from the donor's
checkpoint, which spotrun moved there from the donor's instance."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time

import pytest

from spotlab import Lab
from spotlab.lab import ZONES
from spotrun.core.config import load_settings
from spotrun.core.rundir import JOB_LOG_FILE
from spotrun.drive import revive
from spotrun.store.ledger import Ledger
from spotrun.store.sweeps import SweepStore
from tests.conftest import Env
from tests.e2e.sweep_ledger import sweep_state
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


def _query(env: Env, sql: str, *args: object) -> list[tuple[object, ...]]:
    """Read the ledger directly (a spotrun command would restart the controller)."""
    with sqlite3.connect(env.home / "ledger.db") as db:
        return list(db.execute(sql, args))


def test_pbt_copies_a_checkpoint_across_instances_and_survives_a_restart(
    aws_env: Env, lab: Lab
) -> None:
    env = aws_env
    since = time.time() - 6 * 3600
    for zone in ZONES:
        lab.prices.set_spot("c6i.large", zone, [(since, 0.5)])
    sweep_id = env.cli(
        "sweep",
        "digits-fast",
        "--cloud",
        "aws",
        "--instance-type",
        "c6i.large",
        "--search",
        "pbt",
        "--trials",
        "2",
        "--pbt-interval",
        "1",
        "--space",
        "lr=0.001:0.5:log",
        "--set",
        "epochs=2",
        "--set",
        "threads=1",
        "--max-parallel",
        "1",
        "-d",
        check=True,
    ).stdout.strip()
    trial_2_run = "SELECT run_id FROM sweep_trials WHERE sweep_id = ? AND idx = 2"
    wait_for(
        lambda: _query(env, trial_2_run, sweep_id)[0][0] is not None,
        timeout=400,
        what="the second generation's first trial launched",
    )
    decided = _query(env, "SELECT * FROM pbt_lineage WHERE sweep_id = ? ORDER BY idx", sweep_id)
    assert [row[1] for row in decided] == [2, 3]  # both members' next steps, written at once
    with Ledger(load_settings(env.home)) as ledger:
        sweep = SweepStore(ledger).get(sweep_id)
    assert sweep.supervisor_pid is not None
    os.kill(sweep.supervisor_pid, signal.SIGKILL)
    wait_for(lambda: not revive.is_supervised(sweep), 30, "the controller to die")
    env.cli("sweep", "ls", check=True)  # the next command starts a new controller
    wait_for(
        lambda: sweep_state(env, sweep_id) == "completed",
        timeout=500,
        what="the sweep to complete",
    )
    # the decisions the first controller wrote are the ones kept
    assert _query(env, "SELECT * FROM pbt_lineage WHERE sweep_id = ? ORDER BY idx", sweep_id) == (
        decided
    )
    status = json.loads(env.cli("sweep", "status", sweep_id, "--json", check=True).stdout)
    rows = {row["trial"]: row for row in status["leaderboard"]}
    assert all(row["status"] == "succeeded" for row in rows.values()), rows
    copied = [rows[i] for i in (2, 3) if rows[i]["lineage"]["exploited"]]
    assert len(copied) == 1, rows
    lineage = copied[0]["lineage"]
    donor_run, new_run = rows[lineage["trial"]]["run_id"], copied[0]["run_id"]

    def instances(run_id: str) -> set[object]:
        return {r[0] for r in _query(env, "SELECT id FROM instances WHERE run_id = ?", run_id)}

    # the donor's checkpoint went from the donor's instance home, and on to another instance
    assert instances(donor_run) and instances(new_run)
    assert not instances(donor_run) & instances(new_run)
    (head,) = instances(new_run)
    events = [
        str(r[0]) for r in _query(env, "SELECT message FROM events WHERE run_id = ?", new_run)
    ]
    assert any(f"copied the weights of trial {lineage['trial']}" in e for e in events), events
    assert any(f"checkpoint file(s) restored on {head}" in e for e in events), events
    job_log = (env.home / "runs" / new_run / JOB_LOG_FILE).read_text()
    assert f"resumed at epoch 1 step {lineage['step']}" in job_log
    text = env.cli("sweep", "status", sweep_id, check=True).stdout
    assert f"from t{lineage['trial']}@epoch1" in text
    assert lab.instances(states=("pending", "running")) == []
