"""A TPE sweep in the lab whose controller is killed between trials: the next command's
controller loads the study from the sweep's folder, adopts the live trial, tells it to the
study, and asks for the next one, with no trial asked twice; the leaderboard's best-so-far
against dollars spent counts the lab's spot prices."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time

import optuna
import pytest

from spotlab import Lab
from spotlab.lab import ZONES
from spotrun.core.config import load_settings
from spotrun.core.rundir import SWEEP_STUDY_FILE
from spotrun.drive import revive
from spotrun.store.ledger import Ledger
from spotrun.store.sweeps import SweepStore
from tests.conftest import Env
from tests.e2e.sweep_ledger import sweep_state
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


def _trial_runs(env: Env, sweep_id: str) -> dict[int, tuple[str | None, str | None]]:
    """trial index -> (run id, run state), read from the ledger (no spotrun command: one
    would restart the controller)."""
    with sqlite3.connect(env.home / "ledger.db") as db:
        rows = db.execute(
            "SELECT t.idx, t.run_id, r.state FROM sweep_trials t "
            "LEFT JOIN runs r ON r.id = t.run_id WHERE t.sweep_id = ?",
            (sweep_id,),
        )
        return {idx: (run_id, state) for idx, run_id, state in rows}


def test_a_restarted_controller_keeps_the_study_of_a_tpe_sweep(aws_env: Env, lab: Lab) -> None:
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
        "tpe",
        "--trials",
        "3",
        "--space",
        "lr=0.01:0.5:log",
        "--set",
        "epochs=1",
        "--set",
        "threads=1",
        "--max-parallel",
        "1",
        "-d",
        check=True,
    ).stdout.strip()
    # Trial 0 told and trial 1 asked for and launched (the same round): kill the controller.
    wait_for(
        lambda: _trial_runs(env, sweep_id)[1][0] is not None, timeout=300, what="trial 1 launched"
    )
    assert _trial_runs(env, sweep_id)[0][1] == "succeeded"
    with Ledger(load_settings(env.home)) as ledger:
        sweep = SweepStore(ledger).get(sweep_id)
    assert sweep.supervisor_pid is not None
    os.kill(sweep.supervisor_pid, signal.SIGKILL)
    wait_for(lambda: not revive.is_supervised(sweep), 30, "the controller to die")
    env.cli("sweep", "ls", check=True)  # the next command starts a new controller
    wait_for(
        lambda: all(state == "succeeded" for _run, state in _trial_runs(env, sweep_id).values()),
        timeout=400,
        what="the sweep's three trials to succeed",
    )
    wait_for(
        lambda: sweep_state(env, sweep_id) == "completed",
        timeout=120,
        what="the sweep to complete",
    )
    status = json.loads(env.cli("sweep", "status", sweep_id, "--json", check=True).stdout)
    # One study across both controllers: three trials asked, each once, each told once.
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(sweep.sweep_dir / SWEEP_STUDY_FILE))
    )
    study = optuna.load_study(study_name=sweep_id, storage=storage)
    asked = sorted(study.trials, key=lambda t: t.number)
    assert [t.user_attrs["sweep_trial"] for t in asked] == [0, 1, 2]
    assert all(t.state is optuna.trial.TrialState.COMPLETE for t in asked)
    board = {row["trial"]: row for row in status["leaderboard"]}
    for trial in asked:
        row = board[trial.user_attrs["sweep_trial"]]
        assert float(row["params"]["lr"]) == pytest.approx(trial.params["lr"], rel=1e-5)
        assert trial.value == row["test_acc"]
    # The new controller's proposal is not the first controller's first one again.
    assert board[2]["params"] not in (board[0]["params"], board[1]["params"])
    # Best-so-far against dollars spent, at the lab's $0.50/h: the spend grows trial by trial.
    spent = [p["spent_usd"] for p in status["best_by_spend"]]
    assert len(spent) == 3 and 0 < spent[0] < spent[1] < spent[2]
    assert status["best_by_spend"][-1]["best"] == max(r["test_acc"] for r in board.values())
    assert lab.instances(states=("pending", "running")) == []


def test_a_sweep_starts_a_trial_only_when_the_budget_pays_for_it_whole(
    aws_env: Env, lab: Lab
) -> None:
    # $36/h ($0.01 a second, a minute at least per instance): six one-epoch trials cannot all
    # fit in $2.50. Once a trial has ended, its length says what the next one costs; the sweep
    # launches none that the money left cannot finish, so no trial is stopped half-way by the
    # budget (before, a trial started whenever the spend was under the cap, and was stopped).
    env = aws_env
    since = time.time() - 6 * 3600
    for zone in ZONES:
        lab.prices.set_spot("c6i.large", zone, [(since, 36.0)])
    sweep_id = env.cli(
        "sweep",
        "digits-fast",
        "--cloud",
        "aws",
        "--instance-type",
        "c6i.large",
        "--grid",
        "lr=0.1,0.15,0.2,0.25,0.3,0.35",
        "--set",
        "epochs=1",
        "--set",
        "threads=1",
        "--max-parallel",
        "1",
        "--max-cost",
        "2.5",
        "-d",
        check=True,
    ).stdout.strip()
    wait_for(
        lambda: sweep_state(env, sweep_id) != "running",
        timeout=600,
        what="the budget to end the sweep",
    )
    status = json.loads(env.cli("sweep", "status", sweep_id, "--json", check=True).stdout)
    assert status["state"] == "stopped", status["message"]
    assert "cannot pay for another whole trial" in status["message"], status["message"]
    statuses = [row["status"] for row in status["leaderboard"]]
    launched = [s for s in statuses if s != "skipped"]
    assert launched and all(s == "succeeded" for s in launched), statuses
    assert "skipped" in statuses
    assert 0 < status["best_by_spend"][-1]["spent_usd"] <= 2.5
    assert lab.instances(states=("pending", "running")) == []
