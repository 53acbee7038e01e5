"""`spotrun sweep --search tpe|cmaes|qmc` on the local cloud: each trial's values are proposed
by Optuna's sampler when a place frees up, after the trials before it were told; the study is
the sweep folder's journal; `sweep status` shows best-so-far against dollars spent; Hyperband
is a pruner beside ASHA; bad search input launches nothing."""

from __future__ import annotations

import json
import re

import optuna
import pytest

from spotrun.core.rundir import SWEEP_STUDY_FILE
from tests.conftest import Env
from tests.e2e.sweep_ledger import sweeps_and_runs

pytestmark = pytest.mark.slow

ONE_EPOCH = ["--set", "epochs=1", "--set", "threads=1"]


@pytest.mark.parametrize("search", ["tpe", "cmaes", "qmc"])
def test_each_trial_is_proposed_after_the_ones_before_it_were_told(env: Env, search: str) -> None:
    proc = env.cli(
        "sweep",
        "digits-fast",
        "--search",
        search,
        "--trials",
        "2",
        "--space",
        "lr=0.01:0.5:log",
        *ONE_EPOCH,
        "--max-parallel",
        "1",
        "--name",
        "searched",
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the follow view: a trial waiting for its place has no values yet; it gets them at launch
    assert "trial 1 (values chosen at launch): pending" in proc.stdout
    assert re.search(r"^trial 1 \(lr=[\d.e-]+\): running", proc.stdout, re.MULTILINE)
    status = json.loads(env.cli("sweep", "status", "searched", "--json", check=True).stdout)
    assert status["state"] == "completed" and status["search"] == search
    board = {row["trial"]: row for row in status["leaderboard"]}
    assert sorted(board) == [0, 1]
    assert all(row["status"] == "succeeded" for row in board.values())
    # The study in the sweep's folder holds each trial: its values are the trial's, its value
    # the trial's last test_acc, and it was asked for only after the trial before had been told.
    journal = env.home / "sweeps" / status["id"] / SWEEP_STUDY_FILE
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal))
    )
    study = optuna.load_study(study_name=status["id"], storage=storage)
    asked = sorted(study.trials, key=lambda t: t.number)
    assert [t.user_attrs["sweep_trial"] for t in asked] == [0, 1]
    for trial in asked:
        row = board[trial.user_attrs["sweep_trial"]]
        assert trial.state is optuna.trial.TrialState.COMPLETE
        assert float(row["params"]["lr"]) == pytest.approx(trial.params["lr"], rel=1e-5)
        assert 0.01 <= trial.params["lr"] <= 0.5 and trial.value == row["test_acc"]
    for before, after in zip(asked, asked[1:]):
        assert before.datetime_complete is not None and after.datetime_start is not None
        assert after.datetime_start >= before.datetime_complete
    # best-so-far against dollars spent: one point per ended trial (the local cloud is free)
    points = status["best_by_spend"]
    assert [p["spent_usd"] for p in points] == [0.0, 0.0]
    assert points[-1]["best"] == max(row["test_acc"] for row in board.values())
    text = env.cli("sweep", "status", "searched", check=True).stdout
    assert f"best test_acc so far against dollars spent ({search} search" in text


def test_hyperband_stops_hopeless_trials_in_their_brackets(env: Env) -> None:
    # lr=0.2 learns digits in an epoch; lr=0.00001 does not in 8. Hyperband (grace 1 epoch,
    # up to 8, 1 in 2 goes on) puts each trial in a bracket by a hash of the sweep's name and
    # its number: for "grid-hb", brackets 1 and 2 for the good trials (launched first), 0 and
    # 2 for the hopeless ones, so the last one meets a good one at its bracket's rung (epoch 4).
    proc = env.cli(
        "sweep",
        "digits-fast",
        "--search",
        "grid",
        "--grid",
        "lr=0.2,0.00001",
        "--grid",
        "batch_size=32,64",
        "--set",
        "epochs=8",
        "--set",
        "threads=1",
        "--max-parallel",
        "2",
        "--pruner",
        "hyperband",
        "--grace-epochs",
        "1",
        "--reduction-factor",
        "2",
        "--name",
        "grid-hb",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = json.loads(env.cli("sweep", "status", "grid-hb", "--json", check=True).stdout)
    assert status["early_stop"] == "hyperband" and status["counts"]["trials"] == 4
    pruned = [row for row in status["leaderboard"] if row["status"] == "pruned"]
    assert pruned, status["leaderboard"]
    for row in pruned:
        assert row["params"]["lr"] == "0.00001", row
        assert row["reason"].startswith("stopped early by Hyperband: test_acc"), row


def test_bad_search_input_exits_2_and_launches_nothing(env: Env) -> None:
    for args, message in (
        (["--search", "tpe", "--space", "lr=0.01:0.5"], "needs a trial count: give --trials N"),
        (["--search", "bayes", "--trials", "2", "--space", "lr=0.01:0.5"], "'bayes'"),
        (["--grid", "lr=0.1,0.2", "--trials", "2"], "a grid tries every --grid combination"),
        (["--search", "tpe", "--trials", "0", "--space", "lr=0.01:0.5"], "at least 1"),
    ):
        proc = env.cli("sweep", "digits-fast", *args)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
    assert sweeps_and_runs(env) == (0, 0) and env.sessions() == []
