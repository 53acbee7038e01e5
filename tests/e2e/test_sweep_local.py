"""`spotrun sweep` on the local cloud: bad input launches nothing; a 2x3 grid runs to the end
with ASHA stopping the losers early and a leaderboard (table, JSON, CSV, PNG); stop."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import pytest

from spotrun.core.config import load_settings
from spotrun.core.errors import UsageError
from spotrun.core.launch_request import LaunchRequest
from spotrun.service.sweeps import counts, prepare_sweep
from spotrun.store.ledger import Ledger
from spotrun.store.sweeps import SweepStore
from tests.conftest import Env
from tests.e2e.sweep_ledger import sweeps_and_runs
from tests.helpers import wait_for

TINY = ["--set", "threads=1"]
# A trial's epochs in the ASHA grid: enough that a hopeless trial's stop at its first rung
# reaches it before its last epoch on a loaded machine (an epoch of digits takes ~0.5 s).
GRID_EPOCHS = 8


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"grid": ["lr="]}, "empty value list"),
        ({}, "no trials"),
        ({"grid": ["learning_rate=0.1,0.2"]}, "learning_rate"),
        ({"random": 3, "space": ["lr=1:0.1"]}, "LOW must be below HIGH"),
        ({"random": 3, "space": ["lr=0:1:log"]}, "above 0"),
        ({"space": ["lr=0.1:1"]}, "give --random N"),
        ({"grid": ["lr=0.1,0.2"], "max_parallel": 0}, "--max-parallel must be at least 1"),
        ({"grid": ["lr=0.1"], "metric": "val_bleu"}, "does not log"),
        ({"grid": ["lr=0.1,fast"]}, "lr"),
        ({"grid": ["lr=0.1"], "early_stop": "median"}, "asha, hyperband or none"),
        ({"grid": ["lr=0.1"], "request": {"max_cost_usd": 0.0}}, "--max-cost must be above 0"),
    ],
)
def test_bad_input_is_a_usage_error_before_anything_is_made(
    env: Env, options: dict[str, Any], message: str
) -> None:
    settings = load_settings(env.home)
    asked = options.pop("request", {})
    with pytest.raises(UsageError, match=re.escape(message)):
        prepare_sweep(settings, "digits-fast", LaunchRequest(**asked), **options)
    assert sweeps_and_runs(env) == (0, 0)


def test_bad_input_on_the_command_line_exits_2_and_launches_nothing(env: Env) -> None:
    proc = env.cli("sweep", "digits-fast", "--grid", "lr=0.1,0.2", "--max-parallel", "0")
    assert proc.returncode == 2 and "--max-parallel must be at least 1" in proc.stderr
    proc = env.cli("sweep", "nosuch-recipe", "--grid", "lr=0.1")
    assert proc.returncode != 0 and "unknown recipe" in proc.stderr
    # every word a user types gets a did-you-mean: --grid keys and --metric too
    proc = env.cli("sweep", "digits-fast", "--grid", "lrr=0.1,0.2")
    assert proc.returncode == 2 and "did you mean lr?" in proc.stderr, proc.stderr
    proc = env.cli("sweep", "digits-fast", "--grid", "lr=0.1", "--metric", "test_ac")
    assert proc.returncode == 2 and "did you mean test_acc" in proc.stderr, proc.stderr
    assert sweeps_and_runs(env) == (0, 0) and env.sessions() == []


@pytest.mark.slow
def test_a_2x3_grid_with_asha_runs_to_the_end_with_its_leaderboard(env: Env) -> None:
    # lr=0.2 learns digits in an epoch; lr=0.0005 does not: ASHA (grace 1 epoch, 1 in 2 goes
    # on) stops those as soon as they reach a rung behind the good ones. A tracker's variable
    # of this shell and --env go into every trial's job environment.
    env.vars["MLFLOW_EXPERIMENT_NAME"] = "grid-experiment"
    proc = env.cli(
        "sweep",
        "digits-fast",
        "--env",
        "NOTE=hi",
        "--grid",
        "lr=0.2,0.0005",
        "--grid",
        "batch_size=32,64,128",
        "--set",
        f"epochs={GRID_EPOCHS}",
        *TINY,
        "--max-parallel",
        "2",
        "--early-stop",
        "asha",
        "--grace-epochs",
        "1",
        "--reduction-factor",
        "2",
        "--name",
        "grid",
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sweep completed" in proc.stdout and "RANK" in proc.stdout
    assert "carrying MLFLOW_EXPERIMENT_NAME into the job's environment" in proc.stderr
    # The trials' evaluations show as they come, not only in the board at the end.
    first = re.search(r"^trial \d: epoch 1  acc [\d.]+%", proc.stdout, re.MULTILINE)
    assert first is not None and first.start() < proc.stdout.index("sweep completed")
    status = json.loads(env.cli("sweep", "status", "grid", "--json", check=True).stdout)
    assert status["state"] == "completed" and status["counts"]["trials"] == 6
    board = status["leaderboard"]
    assert [row["rank"] for row in board] == [1, 2, 3, 4, 5, 6]
    values = [row["test_acc"] for row in board]
    assert values == sorted(values, reverse=True)
    best = board[0]
    assert (
        best["params"]["lr"] == "0.2"
        and best["status"] == "succeeded"
        and best["epochs"] == GRID_EPOCHS
    )
    assert best["test_acc"] >= 0.9 and best["cost_usd"] == 0.0 and best["time_s"] > 0
    assert best["time_to_target_s"] is not None  # digits-fast's target is 97%
    pruned = [row for row in board if row["status"] == "pruned"]
    hopeless = [row for row in board if row["params"]["lr"] == "0.0005"]
    assert all(row in pruned for row in hopeless), board  # each stopped at its first rung
    for row in pruned:  # stopped at a rung before the last epoch, and it says why (how far
        # it trained before the stop reached it depends on this machine's lag)
        decided_at = re.search(r"ASHA: .* at epoch (\d+) ", row["reason"])
        assert decided_at is not None and int(decided_at.group(1)) < GRID_EPOCHS, row
        assert row["epochs"] <= GRID_EPOCHS
    # each trial was a run of its own, in its own tmux session, now ended
    runs = [r for r in env.runs() if r["sweep_id"] == status["id"]]
    assert len(runs) == 6 and env.sessions() == []
    for run in runs:
        job_env = env.home / "runs" / run["id"] / ".job-env.json"
        assert job_env.stat().st_mode & 0o077 == 0
        carried = json.loads(job_env.read_text())
        assert (carried["MLFLOW_EXPERIMENT_NAME"], carried["NOTE"]) == ("grid-experiment", "hi")
    rows = list(csv.DictReader(io.StringIO(env.cli("sweep", "status", "grid", "--csv").stdout)))
    assert [r["trial"] for r in rows] == [str(row["trial"]) for row in board]
    assert {"lr", "batch_size", "test_acc", "cost_usd", "cost_to_target_usd"} <= set(rows[0])
    plot = env.home / "board.png"
    env.cli("sweep", "status", "grid", "--plot", str(plot), check=True)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    listed = json.loads(env.cli("sweep", "ls", "--json", check=True).stdout)
    assert [(s["name"], s["state"], s["pruned"]) for s in listed] == [
        ("grid", "completed", len(pruned))
    ]
    # `spotrun plot SWEEP`: one curve per trial, each its run's metrics.jsonl
    curves = json.loads(env.cli("plot", "grid", "--json", check=True).stdout)["curves"]
    assert sorted(c["run"] for c in curves) == sorted(r["id"] for r in runs)
    for curve in curves:
        lines = (env.home / "runs" / curve["run"] / "metrics.jsonl").read_text().splitlines()
        assert curve["y"] == [json.loads(line)["test_acc"] for line in lines]


@pytest.mark.slow
def test_stop_ends_a_sweep_its_live_trials_and_skips_the_rest(env: Env) -> None:
    sweep_id = env.cli(
        "sweep",
        "digits-fast",
        "--grid",
        "lr=0.1,0.2,0.3",
        "--set",
        "epochs=400",
        *TINY,
        "--max-parallel",
        "1",
        "-d",
        check=True,
    ).stdout.strip()
    settings = load_settings(env.home)

    def running() -> bool:
        # `sweep status --json`'s counts, computed here from the ledger: a CLI poll was one
        # spotrun process after another while the trial started
        with Ledger(settings) as ledger:
            store = SweepStore(ledger)
            live = counts(store, store.get(sweep_id))["live"]
        return live == 1 and env.sessions() != []

    wait_for(running, timeout=60, what="the first trial to run")
    proc = env.cli("sweep", "stop", sweep_id, check=True, timeout=120)
    assert "stopped" in proc.stdout
    status = json.loads(env.cli("sweep", "status", sweep_id, "--json", check=True).stdout)
    assert status["state"] == "stopped" and status["message"] == "stopped by the user"
    statuses = sorted(row["status"] for row in status["leaderboard"])
    assert statuses == ["skipped", "skipped", "stopped"]
    assert env.sessions() == []
    again = env.cli("sweep", "stop", sweep_id)
    assert again.returncode != 0 and "already ended" in again.stderr
