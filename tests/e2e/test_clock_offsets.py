"""Clocks that disagree, and a spot notice's own time, through the real CLI against the lab.

The laptop's clock is hours off the instances' (spotlab.clock: its Python processes' wall clock
shifted, the CLI's supervisor included). The agent on the instance must measure the run's
deadline itself, as a duration, and never compare a time taken here with its own clock.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spotlab import Lab
from spotlab.clock import offset_env
from spotlab.fixtures import use_lab
from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

TWO_HOURS_S = 7200.0

# A job that runs until `exec` says go (so the test, not a sleep, decides how long it runs).
JOB = """\
import time
from pathlib import Path
print("started", flush=True)
while not Path("go").exists():
    time.sleep(0.1)
print("done", flush=True)
"""


def _task(root: Path, max_hours: float) -> Path:
    proj = root / "proj"
    proj.mkdir()
    (proj / "job.py").write_text(JOB)
    task = root / "task.yaml"
    task.write_text(
        "name: clocks\n"
        "resources: {gpus: 0}\n"
        "workdir: proj\n"
        f"run: {json.dumps(sys.executable + ' job.py')}\n"
        f"max_hours: {max_hours}\n"
    )
    return task


@pytest.fixture
def fast_env(env: Env, lab: Lab) -> Iterator[Env]:
    with use_lab(env, lab, notice_poll_s=0.5):
        yield env


def _state(env: Env, run_id: str) -> str:
    with Ledger(load_settings(env.home)) as ledger:
        return ledger.get_run(run_id).state.value


def _status(env: Env, run_id: str) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    return status


def _story(env: Env, run_id: str) -> str:
    """What the run did, for a failure's message."""
    log = env.home / "runs" / run_id / "supervisor.log"
    return f"{_status(env, run_id)}\n{log.read_text()[-3000:] if log.exists() else ''}"


def _wait(env: Env, run_id: str, predicate: Any, timeout: float, what: str) -> Any:
    try:
        return wait_for(predicate, timeout, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_story(env, run_id)}") from None


def _host_file(lab: Lab, instance_id: str, run_id: str, name: str) -> Path:
    return lab.host(instance_id).path(f"/root/.spotrun/runs/{run_id}/{name}")


def test_a_laptop_clock_two_hours_behind_leaves_the_job_its_max_hours(
    fast_env: Env, lab: Lab, tmp_path: Path
) -> None:
    """The controller's clock is 2 h behind the instance's and the run has max_hours 1. Before
    the deadline travelled as a duration, the agent read the controller's "created + 1 h" as
    an hour past on its own clock and ended the job at its first look."""
    env = fast_env
    env.vars = offset_env(-TWO_HOURS_S, env.vars)
    run_id = env.cli(
        "launch", str(_task(tmp_path, 1)), "--cloud", "aws", "-d", check=True
    ).stdout.strip()
    _wait(env, run_id, lambda: lab.instances(run_id), 60, "the run's instance")
    instance_id = lab.instances(run_id)[0]["InstanceId"]
    lab.wait_for_host(instance_id)
    job_log = _host_file(lab, instance_id, run_id, "job.log")
    wait_for(lambda: job_log.exists() and "started" in job_log.read_text(), 90, "the job")
    watcher_log = _host_file(lab, instance_id, run_id, "watcher.log")
    wait_for(
        lambda: watcher_log.exists() and "watching run" in watcher_log.read_text(),
        60,
        "the agent's watcher",
    )
    # Each of the watcher's rounds asks IMDS for a notice, then judges the deadline: a dozen
    # more requests are several rounds in which the job was not ended.
    seen = lab.imds(instance_id).requests
    wait_for(
        lambda: lab.imds(instance_id).requests >= seen + 12,
        60,
        f"the watcher's rounds (its log: {watcher_log.read_text()[-800:]})",
    )
    assert not _host_file(lab, instance_id, run_id, "self-terminated.json").exists()
    assert _state(env, run_id) == "running"

    env.cli("exec", run_id, "--cmd", "touch go", check=True)
    wait_for(lambda: _state(env, run_id) in ("succeeded", "failed", "stopped"), 120, "the end")
    run = _status(env, run_id)
    assert run["state"] == "succeeded", (run["message"], run["events"])
    assert "done" in (env.home / "runs" / run_id / "job.log").read_text()
    assert not (env.home / "runs" / run_id / "self-terminated.json").exists()
