"""One display of a metric and a state (issue 34, point 7), through the real CLI: an accuracy
reads `acc 99.2%` and a loss four significant digits in launch, ls, status, logs and the
leaderboard; a pruned trial reads `pruned` in ls, status and the sweep's board; the device line
is said once; a resumed run's first progress line is the new job's; the sweep plot's legend
names trials by their hyperparameters. The ledger and --json keep the raw names."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.rundir import METRICS_FILE, PROGRESS_FILE
from spotrun.core.runstates import RunState
from spotrun.store.ledger import Ledger
from spotrun.store.sweep_spec import SweepSpec
from spotrun.store.sweeps import SweepState, SweepStore, TrialStatus
from spotrun.store.trial_marks import PRUNED
from tests.conftest import REPO, Env
from tests.helpers import wait_for

RAW = re.compile(r"test_acc|train_loss|0\.99160")  # the ledger's names, a raw fraction


def _sweep_with_a_pruned_trial(env: Env) -> dict[str, str]:
    """Sweep `scan`, ended: trial 0 (lr=0.1) ran to its end, trial 1 (lr=0.4) was pruned."""
    evaluation = {"step": 44, "epoch": 2, "test_acc": 0.9916, "train_loss": 0.031237}
    names = {}
    with Ledger(load_settings(env.home)) as ledger:
        store = SweepStore(ledger)
        spec = SweepSpec(recipe="digits-fast", max_parallel=2, name="scan")
        sweep = store.create(spec, [{"lr": "0.1"}, {"lr": "0.4"}], {})
        for index, status in ((0, TrialStatus.LAUNCHED), (1, TrialStatus.PRUNED)):
            run = ledger.create_run(
                LaunchSpec(recipe="digits-fast", name=f"trial-{index}"), sweep_id=sweep.id
            )
            run.run_dir.mkdir(parents=True, exist_ok=True)
            (run.run_dir / METRICS_FILE).write_text(json.dumps(evaluation) + "\n")
            ledger.set_metrics(run.id, evaluation)
            ledger.transition(run.id, RunState.STOPPED, "made by the test")
            store.mark(sweep.id, index, status, run_id=run.id)
            names[run.id] = f"trial-{index}"
        store.end(sweep.id, SweepState.COMPLETED, "made by the test")
    return names


def test_metrics_and_a_pruned_state_read_the_same_in_ls_status_and_the_board(env: Env) -> None:
    assert TrialStatus.PRUNED.value == PRUNED  # ls reads the mark without the sweep models
    _sweep_with_a_pruned_trial(env)
    listed = env.cli("ls", check=True).stdout
    (kept,) = [line for line in listed.splitlines() if " trial-0 " in line]
    (pruned,) = [line for line in listed.splitlines() if " trial-1 " in line]
    assert " stopped " in kept and " pruned " in pruned and " stopped " not in pruned, listed
    assert "acc 99.2%  loss 0.03124  step 44" in kept and not RAW.search(listed), listed
    status = env.cli("status", "trial-1", check=True).stdout
    assert "state     pruned" in status and "metrics   acc 99.2%  loss 0.03124" in status
    board = env.cli("sweep", "status", "scan", check=True).stdout
    (header,) = [line for line in board.splitlines() if line.startswith("RANK")]
    assert " ACC " in header and "TEST_ACC" not in header, board
    rows = [line.split() for line in board.splitlines() if "99.2%" in line]
    assert len(rows) == 2 and "pruned" in rows[0] + rows[1], board
    # the ledger's own names where machines read them
    assert json.loads(env.cli("status", "trial-1", "--json", check=True).stdout)["state"] == (
        "stopped"
    )
    assert json.loads(env.cli("ls", "--json", check=True).stdout)[0]["metrics"]["test_acc"] == (
        0.9916
    )


def test_the_sweep_plot_legend_names_trials_by_their_hyperparameters(env: Env) -> None:
    names = _sweep_with_a_pruned_trial(env)
    plotted = json.loads(env.cli("plot", "scan", "--json", check=True).stdout)
    legends = {names[c["run"]]: c["legend"] for c in plotted["curves"]}
    assert legends == {"trial-0": "lr=0.1", "trial-1": "lr=0.4"}


@pytest.mark.slow
def test_a_run_says_its_metrics_and_its_device_once_in_each_view(env: Env) -> None:
    launched = env.cli("launch", "digits-fast", "--set", "epochs=1", "--name", "d", timeout=600)
    assert launched.returncode == 0, launched.stderr
    said = launched.stdout
    assert re.search(r"epoch 1/1  acc \d+\.\d%  loss \d\.\d{3,4}  step \d+", said), said
    assert said.count("device: ") == 1, said
    listed = env.cli("ls", check=True).stdout
    assert re.search(r"acc \d+\.\d%  loss \d\.\d{3,4}  step \d+", listed), listed
    status = env.cli("status", "d", check=True).stdout
    assert len(re.findall(r"^device +cpu|device: cpu", status, re.M)) == 1, status
    logs = env.cli("logs", "d", check=True).stdout
    (line,) = [x for x in logs.splitlines() if x.startswith("epoch 1/1")]
    assert re.search(r"  acc \d+\.\d%", line) and not RAW.search(logs), logs


@pytest.mark.slow
def test_a_resumed_runs_first_progress_line_is_the_new_jobs(env: Env, tmp_path: Path) -> None:
    env.cli("launch", "--cmd", "sleep 600", "-d", "--name", "again", check=True, timeout=300)
    status = lambda: json.loads(env.cli("status", "again", "--json", check=True).stdout)  # noqa: E731
    wait_for(lambda: status()["state"] == "running", timeout=240, what="the run running")
    env.cli("stop", "again", check=True, timeout=300)
    # what its last job left: a progress line from before the resume
    stale = {"epoch": 48, "epochs": 400, "batch": 3, "batches": 22, "eta_s": 304.0}
    run_dir = env.home / "runs" / status()["id"]
    (run_dir / PROGRESS_FILE).write_text(json.dumps({**stale, "at": time.time() - 60}))
    shown = tmp_path / "resume.out"
    with open(shown, "w") as sink:
        resumed = subprocess.Popen(
            [sys.executable, "-m", "spotrun", "resume", "again"],
            stdout=sink,
            stderr=subprocess.PIPE,
            text=True,
            env=env.vars,
            cwd=REPO,
        )
    try:
        wait_for(lambda: status()["state"] == "running", timeout=240, what="the run resumed")
        # the new job reports: from now on its progress is the one to show
        fresh = {**stale, "epoch": 1, "epochs": 2, "eta_s": 30.0}
        (run_dir / PROGRESS_FILE).write_text(json.dumps({**fresh, "at": time.time()}))
        wait_for(
            lambda: re.search(r"epoch (1/2|48/400)", shown.read_text()),
            timeout=120,
            what="a progress line",
        )
        resumed.send_signal(signal.SIGINT)  # detaches, the run goes on
        _, err = resumed.communicate(timeout=120)
    finally:
        if resumed.poll() is None:
            resumed.kill()
        env.cli("stop", "again", timeout=300)
    said = shown.read_text()
    assert "epoch 1/2" in said and "epoch 48/400" not in said, said
    assert "detached from again" in err, err
