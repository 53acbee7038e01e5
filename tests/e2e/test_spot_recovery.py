"""Fault injection in the lab: spot notices, reclaims without notice, a damaged checkpoint,
capacity errors on the replacement, supervisors killed at random points.

Every scenario asserts what the issue asks: the run completes; its final metrics equal an
uninterrupted run's bit for bit (digits-fast on the CPU is deterministic); the work lost is
about zero with a notice and at most one checkpoint interval without; no spotrun-tagged
instance is left running; every instance is in the ledger and in the run's cost.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spotrun.config import load_settings
from spotrun.ledger import Ledger
from tests.conftest import REPO, Env
from tests.helpers import wait_for
from tests.lab import Lab
from tests.lab.fixtures import use_lab

pytestmark = pytest.mark.slow

EPOCHS = 5
OVERRIDES = [f"epochs={EPOCHS}", "threads=1"]
COMPARED = ("step", "epoch", "train_loss", "test_loss", "test_acc", "lr")
FAST = {"notice_poll_s": 0.5, "unreachable_s": 4.0, "end_grace_s": 600.0}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uninterrupted run's final metrics (same recipe, same overrides, this machine)."""
    run_dir = tmp_path_factory.mktemp("reference")
    args = [sys.executable, "-m", "spotrun", "train", "digits-fast", "--run-dir", str(run_dir)]
    for item in OVERRIDES:
        args += ["--set", item]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run(args, check=True, capture_output=True, env=env, cwd=REPO, timeout=300)
    return _final(run_dir / "metrics.jsonl")


def _final(path: Path) -> dict[str, Any]:
    last = json.loads(path.read_text().splitlines()[-1])
    return {k: last[k] for k in COMPARED}


@pytest.fixture
def spot_env(env: Env, lab: Lab) -> Iterator[Env]:
    with use_lab(env, lab, **FAST):
        yield env


def _ledger(env: Env) -> Ledger:
    return Ledger(load_settings(env.home))


def _state(env: Env, run_id: str) -> str:
    with _ledger(env) as ledger:
        return ledger.get_run(run_id).state.value


def _launch(env: Env) -> str:
    args = ["launch", "digits-fast", "--cloud", "aws", "-d"]
    for item in OVERRIDES:
        args += ["--set", item]
    return env.cli(*args, check=True).stdout.strip()


def _epoch(env: Env, run_id: str) -> int:
    """The newest epoch the controller has synced home."""
    path = env.home / "runs" / run_id / "metrics.jsonl"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return 0
    return int(json.loads(lines[-1])["epoch"]) if lines else 0


def _live_instance(lab: Lab, run_id: str) -> str:
    def one() -> str | None:
        live = lab.instances(run_id, states=("running",))
        return live[0]["InstanceId"] if len(live) == 1 else None

    return str(wait_for(one, timeout=60, interval=0.1, what="one running instance"))


def _wait_epoch(env: Env, run_id: str, epoch: int) -> None:
    wait_for(
        lambda: _epoch(env, run_id) >= epoch or _state(env, run_id) in ("succeeded", "failed"),
        timeout=180,
        interval=0.1,
        what=f"epoch {epoch} to be synced",
    )
    assert _state(env, run_id) == "running", _events(env, run_id)


def _events(env: Env, run_id: str) -> list[str]:
    with _ledger(env) as ledger:
        return [f"{e.kind}: {e.message}" for e in ledger.events(run_id)]


def _finish(env: Env, lab: Lab, run_id: str, reference: dict[str, Any]) -> dict[str, Any]:
    """Wait for the end and check everything every scenario must hold."""
    wait_for(
        lambda: _state(env, run_id) in ("succeeded", "failed", "stopped"),
        timeout=300,
        what="the run to end",
    )
    events = _events(env, run_id)
    assert _state(env, run_id) == "succeeded", events
    run_dir = env.home / "runs" / run_id
    assert _final(run_dir / "metrics.jsonl") == reference, events
    epochs = [json.loads(x)["epoch"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert epochs == list(range(1, EPOCHS + 1))  # each evaluation exactly once
    # Nothing of the run is left running; every instance is in the ledger and its cost.
    ec2_ids = {i["InstanceId"] for i in lab.instances(run_id)}
    assert not lab.instances(run_id, states=("pending", "running")), events
    with _ledger(env) as ledger:
        records = {r.id: r for r in ledger.instances(run_id)}
        lines = ledger.cost_lines(run_id)
    assert set(records) == ec2_ids, (records, ec2_ids)
    assert all(r.terminated_at is not None for r in records.values())
    priced = {line.instance_id for line in lines if line.kind == "compute"}
    assert priced == ec2_ids, (lines, ec2_ids)
    return {"instances": len(ec2_ids), "log": (run_dir / "job.log").read_text()}


def _lost_steps(log: str) -> list[int]:
    """Per resume: steps trained before the stop that the resume did not keep."""
    stopped_at = None
    lost = []
    for line in log.splitlines():
        if "checkpointing at step" in line:
            stopped_at = int(line.rsplit(" ", 1)[-1])
        elif line.startswith("resumed at epoch"):
            resumed = int(line.rsplit(" ", 1)[-1])
            lost.append((stopped_at - resumed) if stopped_at is not None else -1)
            stopped_at = None
    return lost


def test_notice_at_two_points_of_training(
    spot_env: Env, lab: Lab, reference: dict[str, Any]
) -> None:
    env = spot_env
    run_id = _launch(env)
    for epoch in (1, 3):
        instance_id = _live_instance(lab, run_id)
        _wait_epoch(env, run_id, epoch)
        lab.interrupt(instance_id, notice_s=8.0)
        wait_for(
            lambda: _state(env, run_id) != "running",
            timeout=30,
            interval=0.05,
            what="the notice to interrupt the run",
        )
        wait_for(
            lambda: _state(env, run_id) == "running" and _live_instance(lab, run_id) != instance_id,
            timeout=120,
            what="the job to run on the replacement",
        )
    outcome = _finish(env, lab, run_id, reference)
    assert outcome["instances"] == 3
    assert _lost_steps(outcome["log"]) == [0, 0], outcome["log"]
