"""A job never dies because its controller went away; the agent ends it only for a reason.

The local cloud: a run whose supervisor is killed and not restarted trains to its end alone,
and the next command's supervisor collects it. The lab (moto's EC2 and S3, an sshd host and
IMDS per instance, the agent's watcher on the host): a job that stops making progress is
ended by the instance's agent after run.no_progress_s, its instance terminated, and the run
failed with the agent's reason. (The lab scenario of a run living through its controller's
absence, a notice and the job's end meanwhile, is in test_spot_recovery.py.)
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator

import pytest

from spotlab import Lab
from spotlab.fixtures import use_lab
from spotrun.core.config import load_settings
from spotrun.drive.supervisor import is_supervised
from spotrun.store.ledger import Ledger, RunRecord
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

NO_PROGRESS_S = 5.0  # scaled down from the default 3600 s


def _get(env: Env, run_id: str) -> RunRecord:
    """The run as the ledger has it, read without any spotrun command (which would restart
    its supervisor)."""
    with Ledger(load_settings(env.home)) as ledger:
        return ledger.get_run(run_id)


def _events(env: Env, run_id: str) -> list[str]:
    with Ledger(load_settings(env.home)) as ledger:
        return [f"{e.kind}: {e.message}" for e in ledger.events(run_id)]


def test_a_local_run_trains_to_its_end_with_no_supervisor_and_is_collected_later(
    env: Env,
) -> None:
    run_id = env.cli("launch", "digits-fast", "-d", "--set", "epochs=4", check=True).stdout.strip()
    run_dir = env.home / "runs" / run_id
    metrics = run_dir / "metrics.jsonl"
    wait_for(lambda: metrics.exists() and metrics.read_text().strip(), 180, "a first epoch")
    run = _get(env, run_id)
    assert run.supervisor_pid is not None
    os.kill(run.supervisor_pid, signal.SIGKILL)
    wait_for(lambda: not is_supervised(run), 30, "the supervisor to die", interval=0.05)

    # Nobody runs a command: the job goes on alone to its end, and nothing collects it.
    wait_for(lambda: (run_dir / "exit.json").exists(), 240, "the job to end with no supervisor")
    assert json.loads((run_dir / "exit.json").read_text())["exit_code"] == 0
    assert _get(env, run_id).state.value == "running" and not is_supervised(run)

    env.cli("ls", check=True)  # any command: the supervisor comes back and collects the run
    wait_for(lambda: _get(env, run_id).is_terminal, 120, "the run to end")
    assert _get(env, run_id).state.value == "succeeded", _events(env, run_id)
    assert len(metrics.read_text().splitlines()) == 4
    assert any("supervisor was not running" in e for e in _events(env, run_id))


@pytest.fixture
def stall_env(env: Env, lab: Lab) -> Iterator[Env]:
    with use_lab(env, lab, no_progress_s=NO_PROGRESS_S, notice_poll_s=0.5):
        yield env


def test_a_stalled_job_is_ended_by_its_agent(stall_env: Env, lab: Lab) -> None:
    env = stall_env
    run_id = env.cli(
        "launch", "--cmd", "echo started; sleep 600", "--cloud", "aws", "-d", check=True
    ).stdout.strip()
    wait_for(lambda: _get(env, run_id).is_terminal, 240, "the stalled run to end")
    run = _get(env, run_id)
    events = _events(env, run_id)
    assert run.state.value == "failed", (run.message, events)
    assert run.message is not None and "the instance's agent ended the job" in run.message
    assert "made no progress" in run.message and "run.no_progress_s is 5" in run.message
    (item,) = lab.instances(run_id)
    assert item["State"]["Name"] in ("shutting-down", "terminated")
    key = f"runs/{run_id}/instances/{item['InstanceId']}/self-terminated.json"
    try:
        record = json.loads(lab.s3.get_object(Bucket=lab.bucket, Key=key)["Body"].read())
    except lab.s3.exceptions.NoSuchKey:  # the controller ended the instance before the agent's
        # upload: the agent writes its record before it stops the job, and the sync brought it
        record = json.loads((env.home / "runs" / run_id / "self-terminated.json").read_text())
    assert record["why"] == "no-progress", record
    with Ledger(load_settings(env.home)) as ledger:  # ended, not replaced
        states = [t.to_state.value for t in ledger.transitions(run_id)]
    assert "interrupted" not in states and states[-1] == "failed", states
    assert "started" in (env.home / "runs" / run_id / "job.log").read_text()
