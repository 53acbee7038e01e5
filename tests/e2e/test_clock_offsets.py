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
from spotlab.spot import Scenario
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


# The scaled stand-in for a checkpoint of GBs: 300 MB (a torch-style zip archive, stored
# uncompressed) written after the notice's SIGTERM. Then the job hangs (a worker that never
# exits): only the notice's own time ends the agent's wait for it.
BIG_CHECKPOINT_MB = 300
BIG_JOB = """\
import os, signal, sys, time, zipfile
from pathlib import Path
ck = Path(os.environ["SPOTRUN_CHECKPOINT_DIR"])
saved = ck / "ckpt-000000002.pt"
if saved.exists():
    with zipfile.ZipFile(saved) as archive:
        size = archive.getinfo("data/0").file_size
    print(f"resumed from {saved.name} holding {size} bytes", flush=True)
    sys.exit(0)
def save(*_):
    part = ck / "ckpt-000000002.pt.part"
    chunk = os.urandom(1 << 20)
    with zipfile.ZipFile(part, "w") as archive:
        with archive.open("data/0", "w", force_zip64=True) as out:
            for _ in range(int(os.environ["CHECKPOINT_MB"])):
                out.write(chunk)
    os.replace(part, saved)
    print("saved", flush=True)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)
signal.signal(signal.SIGTERM, save)
print("started", flush=True)
while True:
    time.sleep(0.1)
"""


def _task(
    root: Path, max_hours: float, job: str = JOB, checkpoint_mb: int = BIG_CHECKPOINT_MB
) -> Path:
    proj = root / "proj"
    proj.mkdir()
    (proj / "job.py").write_text(job)
    task = root / "task.yaml"
    task.write_text(
        "name: clocks\n"
        "resources: {gpus: 0}\n"
        "workdir: proj\n"
        f"run: {json.dumps(sys.executable + ' job.py')}\n"
        "checkpoint_dir: ckpt\n"
        f"envs: {{CHECKPOINT_MB: {checkpoint_mb}}}\n"
        f"max_hours: {max_hours}\n"
    )
    return task


@pytest.fixture
def fast_env(env: Env, lab: Lab) -> Iterator[Env]:
    with use_lab(env, lab, notice_poll_s=0.5):
        yield env


def _status(env: Env, run_id: str) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    return status


def _story(env: Env, run_id: str) -> str:
    """What the run did, for a failure's message."""
    log = env.home / "runs" / run_id / "supervisor.log"
    return f"{_status(env, run_id)}\n{log.read_text()[-3000:] if log.exists() else ''}"


def _wait(
    env: Env, run_id: str, predicate: Any, timeout: float, what: str, interval: float = 0.2
) -> Any:
    try:
        return wait_for(predicate, timeout, what, interval=interval)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_story(env, run_id)}") from None


def _host_file(lab: Lab, instance_id: str, run_id: str, name: str) -> Path:
    return lab.hosts.of(instance_id).path(f"/root/.spotrun/runs/{run_id}/{name}")


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
    lab.hosts.wait_for(instance_id)
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
    seen = lab.hosts.imds(instance_id).requests
    wait_for(
        lambda: lab.hosts.imds(instance_id).requests >= seen + 12,
        60,
        f"the watcher's rounds (its log: {watcher_log.read_text()[-800:]})",
    )
    assert not _host_file(lab, instance_id, run_id, "self-terminated.json").exists()
    assert env.run_state(run_id) == "running"

    env.cli("exec", run_id, "--cmd", "touch go", check=True)
    wait_for(lambda: env.run_state(run_id) in ("succeeded", "failed", "stopped"), 120, "the end")
    run = _status(env, run_id)
    assert run["state"] == "succeeded", (run["message"], run["events"])
    assert "done" in (env.home / "runs" / run_id / "job.log").read_text()
    assert not (env.home / "runs" / run_id / "self-terminated.json").exists()


def test_a_big_checkpoint_is_stored_within_the_notices_own_time(
    fast_env: Env, lab: Lab, tmp_path: Path
) -> None:
    """The instance's clock 2 h behind the laptop's, and a notice of 60 s (EC2 gives 120; the lab's 8 s is too short for 300 MB to be written
    and stored on a busy 2-core machine): the job saves 300 MB and then hangs. The agent
    waits for it only until the notice's time less its upload margin (40 s here), then stores
    what it has and says so in notice.json, before EC2 takes the instance; the replacement
    resumes from the big checkpoint. Before, the agent waited a fixed 100 s, past the
    instance's end, and its notice.json never reached the store."""
    env = fast_env
    lab.hosts.clock_offset_s = -TWO_HOURS_S  # the notice's time is in the instance's frame
    task = _task(tmp_path, 1, BIG_JOB)
    run_id = env.cli("launch", str(task), "--cloud", "aws", "-d", check=True).stdout.strip()
    _wait(env, run_id, lambda: lab.instances(run_id), 60, "the run's instance")
    first = lab.instances(run_id)[0]["InstanceId"]
    lab.hosts.wait_for(first)
    job_log = _host_file(lab, first, run_id, "job.log")
    _wait(env, run_id, lambda: job_log.exists() and "started" in job_log.read_text(), 90, "job")

    lab.interruptions.interrupt(first, notice_s=60.0)
    _wait(
        env,
        run_id,
        lambda: env.run_state(run_id) in ("succeeded", "failed", "stopped"),
        300,
        "the run to resume and end",
        interval=1.0,  # minutes of notice and recovery: a look a second is plenty
    )
    run = _status(env, run_id)
    assert run["state"] == "succeeded", (run["message"], run["events"])
    log = (env.home / "runs" / run_id / "job.log").read_text()
    assert f"resumed from ckpt-000000002.pt holding {BIG_CHECKPOINT_MB << 20} bytes" in log, log
    replacement = {i["InstanceId"] for i in lab.instances(run_id)} - {first}
    assert len(replacement) == 1, lab.instances(run_id)
    # The doomed instance's own record of what it stored, in the durable store before its end.
    key = f"runs/{run_id}/instances/{first}/notice.json"
    notice = json.loads(lab.s3.get_object(Bucket=lab.bucket, Key=key)["Body"].read())
    assert notice["stored_at"] is not None and notice["checkpointed"] is False, notice
    assert 0 < notice["left_s"] <= 60, notice


def test_an_instance_clock_two_hours_behind_still_ends_the_job_at_max_hours(
    fast_env: Env, lab: Lab, tmp_path: Path
) -> None:
    """The instance's clock is 2 h behind the laptop's; max_hours 0.02 (72 s) and no
    controller once the job runs (its supervisor killed): the agent alone ends the job and
    its instance at the cap. Before, it compared the laptop's "created + 72 s" with its own
    clock, 2 h short of it, and the instance ran on (and billed) for two hours more."""
    env = fast_env
    lab.hosts.clock_offset_s = -TWO_HOURS_S
    run_id = env.cli(
        "launch", str(_task(tmp_path, 0.02)), "--cloud", "aws", "-d", check=True
    ).stdout.strip()
    _wait(env, run_id, lambda: lab.instances(run_id), 60, "the run's instance")
    instance_id = lab.instances(run_id)[0]["InstanceId"]
    lab.hosts.wait_for(instance_id)
    job_log = _host_file(lab, instance_id, run_id, "job.log")
    _wait(env, run_id, lambda: job_log.exists() and "started" in job_log.read_text(), 90, "job")
    ended = _host_file(lab, instance_id, run_id, "self-terminated.json")
    scenario = Scenario("clocks", env, lab)
    scenario.run_id = run_id
    assert scenario.kill_supervisor(), "the run's supervisor was not there to kill"
    # No spotrun command from here on: any would bring the supervisor back.
    assert env.run_state(run_id) == "running", "the controller ended the run before it was gone"

    def state() -> str:
        (item,) = lab.instances(run_id)
        return str(item["State"]["Name"])

    # EC2 asked once a second: when the instance ended does not matter here, that it did
    wait_for(
        lambda: state() in ("shutting-down", "terminated"),
        180,
        "the agent's self-end",
        interval=1.0,
    )
    record = json.loads(ended.read_text())
    assert record["why"] == "deadline" and record["instance_id"] == instance_id, record


def test_the_controller_waits_out_a_notice_longer_than_its_old_fixed_wait(
    fast_env: Env, lab: Lab, tmp_path: Path
) -> None:
    """A notice 150 s ahead (longer than the 100 s the controller used to wait for a doomed
    instance's checkpoint) and a job that saves, then hangs: the agent stores what it has at
    130 s (the notice's time less its upload margin). The controller waits the seconds the
    agent saw left instead of ending the instance itself at 100 s, before that upload."""
    env = fast_env
    task = _task(tmp_path, 1, BIG_JOB, checkpoint_mb=5)
    run_id = env.cli("launch", str(task), "--cloud", "aws", "-d", check=True).stdout.strip()
    _wait(env, run_id, lambda: lab.instances(run_id), 60, "the run's instance")
    first = lab.instances(run_id)[0]["InstanceId"]
    lab.hosts.wait_for(first)
    job_log = _host_file(lab, first, run_id, "job.log")
    _wait(env, run_id, lambda: job_log.exists() and "started" in job_log.read_text(), 90, "job")

    lab.interruptions.interrupt(first, notice_s=150.0)
    _wait(
        env,
        run_id,
        lambda: env.run_state(run_id) in ("succeeded", "failed", "stopped"),
        400,
        "the run to resume and end",
        interval=1.0,  # minutes of notice and recovery: a look a second is plenty
    )
    run = _status(env, run_id)
    assert run["state"] == "succeeded", (run["message"], run["events"])
    key = f"runs/{run_id}/instances/{first}/notice.json"
    notice = json.loads(lab.s3.get_object(Bucket=lab.bucket, Key=key)["Body"].read())
    assert notice["stored_at"] is not None, notice
