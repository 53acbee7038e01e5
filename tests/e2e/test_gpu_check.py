"""The GPU check before every job (issue 32, item 6): in the lab a GPU instance type's host has
no GPU, as an instance whose driver is broken; torch there sees 0. aws.gpu_mismatch says what
follows: fail the run, replace the instance (bounded), or warn (the lab's default)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spotlab import Lab
from spotlab.fixtures import use_lab
from spotrun.control.gpu_check import MAX_GPU_REPLACEMENTS
from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

STARTED = "job-started"  # what the job writes: it must never run on a refused instance
LIVE = ("pending", "running", "stopping", "stopped")


def _launch(env: Env) -> str:
    args = ["launch", "--cmd", f"echo {STARTED}", "--cloud", "aws", "--gpus", "1", "-d"]
    return env.cli(*args, check=True).stdout.strip()


def _status(env: Env, run_id: str) -> dict[str, Any]:
    return dict(json.loads(env.cli("status", run_id, "--json", check=True).stdout))


def _ended(env: Env, run_id: str) -> dict[str, Any]:
    """The ended run's `status --json`: its end waited for in the ledger (a CLI call every
    0.2 s was most of these tests' CPU), then the CLI asked once."""

    ended = ("succeeded", "failed", "stopped")
    wait_for(lambda: env.run_state(run_id) in ended, 180, f"run {run_id} to end")
    return _status(env, run_id)


def _gpu_events(env: Env, run_id: str) -> list[str]:
    with Ledger(load_settings(env.home)) as ledger:
        return [e.message for e in ledger.events(run_id) if e.kind == "gpu"]


def _job_log(env: Env, run_id: str) -> str:
    log = env.home / "runs" / run_id / "job.log"
    return log.read_text() if log.exists() else ""


def test_gpu_mismatch_fails_the_run(env: Env, lab: Lab) -> None:
    """aws.gpu_mismatch = "fail": the run fails with one line naming the instance's GPUs and
    torch's count, its instance is terminated, and the job never started."""
    with use_lab(env, lab, gpu_mismatch="fail"):
        run_id = _launch(env)
        status = _ended(env, run_id)
        assert status["state"] == "failed", status
        message = status["message"]
        assert "\n" not in message
        (item,) = lab.instances(run_id)
        instance_type = item["InstanceType"]
        assert f"the instance has 1 GPU ({instance_type}) but torch sees 0" in message, message
        assert "driver or CUDA problem" in message and "gpu_mismatch" in message, message
        assert item["State"]["Name"] == "terminated"
        assert STARTED not in _job_log(env, run_id)
        shown = env.cli("status", run_id, check=True).stdout
        assert "torch sees 0" in shown, shown


def test_gpu_mismatch_replaces_the_instance_a_bounded_number_of_times(env: Env, lab: Lab) -> None:
    """aws.gpu_mismatch = "replace": each instance whose GPUs torch cannot see is ended and
    another asked for; every one in the lab has none, so after MAX_GPU_REPLACEMENTS the run
    fails instead of looping, with nothing left running."""
    with use_lab(env, lab, gpu_mismatch="replace"):
        run_id = _launch(env)
        status = _ended(env, run_id)
        assert status["state"] == "failed", status
        assert "torch sees 0" in status["message"], status
        assert f"{MAX_GPU_REPLACEMENTS} instance(s) replaced" in status["message"], status
        made = lab.instances(run_id)
        assert len(made) == MAX_GPU_REPLACEMENTS + 1, made
        assert lab.instances(run_id, states=LIVE) == []
        events = _gpu_events(env, run_id)
        assert sum("replacing the instance" in e for e in events) == MAX_GPU_REPLACEMENTS
        assert STARTED not in _job_log(env, run_id)


def test_gpu_mismatch_warns_and_runs(env: Env, lab: Lab) -> None:
    """The lab's default, "warn": the mismatch is an event and the job runs."""
    with use_lab(env, lab):
        run_id = _launch(env)
        status = _ended(env, run_id)
        assert status["state"] == "succeeded", status
        (event,) = _gpu_events(env, run_id)
        assert "torch sees 0" in event and "running anyway" in event, event
        assert STARTED in _job_log(env, run_id)
