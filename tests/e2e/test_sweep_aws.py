"""`spotrun sweep --cloud aws` in the lab: four one-GPU trials packed onto one four-GPU
instance; a trial whose instance is taken back while the others go on; the budget cap ending
the sweep cleanly. Everything is checked through EC2 (moto), the hosts and the ledger."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

import pytest

from spotlab import Lab
from spotlab.lab import ZONES
from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

ONE_EPOCH = ["--set", "epochs=1", "--set", "threads=1"]
LONG = ["--set", "epochs=400", "--set", "threads=1"]


def _status(env: Env, ref: str) -> dict[str, Any]:
    return json.loads(env.cli("sweep", "status", ref, "--json", check=True).stdout)


def _runs(env: Env, sweep_id: str) -> dict[str, str]:
    """run id -> state, read from the ledger here (polling the CLI would load the machine)."""
    with sqlite3.connect(env.home / "ledger.db") as db:
        rows = db.execute("SELECT id, state FROM runs WHERE sweep_id = ?", (sweep_id,))
        return dict(rows.fetchall())


def _message(env: Env, run_id: str) -> str:
    with sqlite3.connect(env.home / "ledger.db") as db:
        return str(db.execute("SELECT message FROM runs WHERE id = ?", (run_id,)).fetchone()[0])


def _sweep_state(env: Env, sweep_id: str) -> str:
    with sqlite3.connect(env.home / "ledger.db") as db:
        return str(db.execute("SELECT state FROM sweeps WHERE id = ?", (sweep_id,)).fetchone()[0])


def test_four_one_gpu_trials_share_one_four_gpu_instance(aws_env: Env, lab: Lab) -> None:
    env = aws_env
    since = time.time() - 6 * 3600
    for zone in ZONES:  # $0.15 per GPU-hour: below a one-GPU g4dn.xlarge ($0.21+)
        lab.prices.set_spot("g5.12xlarge", zone, [(since, 0.60)])
    proc = env.cli(
        "sweep",
        "digits-fast",
        "--cloud",
        "aws",
        "--gpus-per-trial",
        "1",
        "--grid",
        "lr=0.05,0.1,0.2,0.3",
        *ONE_EPOCH,
        "--max-parallel",
        "4",
        "--name",
        "packed",
        timeout=400,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "packing 4 trials per g5.12xlarge" in proc.stdout  # the planner says why
    status = _status(env, "packed")
    assert status["state"] == "completed" and status["plan"]["slots"] == 4  # trials per instance
    # One instance in EC2 for the whole sweep, terminated at its end.
    (item,) = lab.instances()
    assert item["InstanceType"] == "g5.12xlarge" and item["State"]["Name"] == "terminated"
    board = status["leaderboard"]
    assert sorted(row["status"] for row in board) == ["succeeded"] * 4
    with Ledger(load_settings(env.home)) as ledger:
        gpus = set()
        for row in board:
            events = [e.message for e in ledger.events(row["run_id"])]
            (placed,) = [m for m in events if "CUDA_VISIBLE_DEVICES" in m]
            assert item["InstanceId"] in placed
            gpus.add(placed.rsplit("=", 1)[1].rstrip(")"))
        assert gpus == {"0", "1", "2", "3"}  # one GPU each
    # Each trial pays its share of the one instance; the shares add up to its bill.
    costs = [row["cost_usd"] for row in board]
    assert all(c > 0 for c in costs)
    # --json rounds each row to the cent and a one-epoch trial costs a fraction of one, so
    # the check is on the instance's one row: the exact shares add up to its (rounded) bill.
    args = ("cost", "--sweep", status["id"], "--by", "instance-type", "--json")
    (billed,) = json.loads(env.cli(*args, check=True).stdout)
    assert billed["instance_type"] == "g5.12xlarge"
    assert billed["cost_usd"] == pytest.approx(sum(costs), abs=0.0051)
    per_run = json.loads(env.cli("cost", "--sweep", status["id"], "--json", check=True).stdout)
    assert {r["id"] for r in per_run} == {row["run_id"] for row in board}
    for r in per_run:  # each row is its trial's share, to the cent
        (share,) = [row["cost_usd"] for row in board if row["run_id"] == r["id"]]
        assert r["cost_usd"] == pytest.approx(share, abs=0.0051)


def test_one_trial_interrupted_the_others_go_on_and_the_budget_ends_the_sweep(
    aws_env: Env, lab: Lab
) -> None:
    env = aws_env
    since = time.time() - 6 * 3600
    # A dear CPU type, so that the budget runs out within a minute; the lab stops one in
    # seconds, so a 30 s stop margin lets one instance's minute plus margin fit in the cap
    # (the sweep refuses a cap below that at start).
    path = env.home / "config.toml"
    path.write_text("budget_stop_margin_s = 30\n" + path.read_text())  # before [aws]
    for zone in ZONES:
        lab.prices.set_spot("c6i.large", zone, [(since, 5.0)])
    sweep_id = env.cli(
        "sweep",
        "digits-fast",
        "--cloud",
        "aws",
        "--grid",
        "lr=0.1,0.2,0.3,0.4",
        *LONG,
        "--instance-type",
        "c6i.large",
        "--max-parallel",
        "2",
        "--max-cost",
        "0.25",
        "-d",
        check=True,
    ).stdout.strip()
    wait_for(
        lambda: list(_runs(env, sweep_id).values()).count("running") == 2,
        timeout=120,
        what="two trials running",
    )
    first, second = sorted(_runs(env, sweep_id))
    (victim,) = lab.instances(first, states=("running",))
    lab.interruptions.reclaim(victim["InstanceId"])  # EC2 takes one trial's instance back
    wait_for(
        lambda: _runs(env, sweep_id)[first] != "running",
        timeout=60,
        what="the controller to see the instance gone",
    )
    assert _runs(env, sweep_id)[second] == "running"  # the other trial goes on
    (other,) = lab.instances(second, states=("running",))
    assert lab.hosts.of(other["InstanceId"]).alive
    # The interrupted trial is recovered on a replacement instance (issue 7's recovery).
    wait_for(
        lambda: _runs(env, sweep_id)[first] == "running",
        timeout=180,
        what="the interrupted trial to resume on a replacement",
    )
    assert len(lab.instances(first)) == 2, "the trial got a replacement instance"
    wait_for(lambda: _sweep_state(env, sweep_id) != "running", timeout=240, what="the budget")
    status = _status(env, sweep_id)
    assert status["state"] == "stopped" and "budget" in status["message"]
    assert lab.instances(states=("pending", "running")) == []  # nothing left billing
    # The interrupted trial resumed; the budget stopped it and the other live one, and the
    # last two never started.
    statuses = sorted(row["status"] for row in status["leaderboard"])
    assert statuses == ["skipped", "skipped", "stopped", "stopped"], statuses
    for row in status["leaderboard"]:
        if row["status"] == "stopped":
            assert row["run_id"] and _message(env, row["run_id"]) == "stopped by the sweep's budget"
    spent = sum(row["cost_usd"] or 0.0 for row in status["leaderboard"])
    assert 0 < spent <= 0.25
