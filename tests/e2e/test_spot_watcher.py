"""The agent's watcher against the lab: a real IMDSv2 endpoint per instance, the lab's EC2 and
S3, and a real job under the real job wrapper (here on this machine, for speed: the watcher
talks to the instance only through its metadata URL and the AWS APIs, as on the host)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spotlab import Lab
from spotrun.agent.imds import Imds, MetadataError
from spotrun.agent.watcher import WatchConfig, Watcher
from spotrun.cloud.aws import AwsProvider
from spotrun.cloud.aws.instance_watcher import aws_watcher
from spotrun.cloud.base import InstanceRequest
from spotrun.core.config import Resources, load_settings
from tests.conftest import REPO, Env
from tests.helpers import wait_for

# A job that checkpoints on SIGTERM and exits 75, as the trainer does.
JOB = """
import os, signal, sys, time
def stop(*_):
    os.makedirs("checkpoints", exist_ok=True)
    open("checkpoints/ckpt-000000007.pt", "wb").write(b"weights")
    sys.exit(75)
signal.signal(signal.SIGTERM, stop)
print("working", flush=True)
time.sleep(60)
"""


def _instance(lab: Lab, env: Env) -> str:
    provider = AwsProvider(load_settings(env.home))
    offer = provider.offers(Resources())[0]
    (inst,) = provider.launch(InstanceRequest("w4tcher00001", offer))
    lab.hosts.wait_for(inst.id)
    return inst.id


def _job(run_dir: Path) -> subprocess.Popen[bytes]:
    run_dir.mkdir(parents=True, exist_ok=True)
    wrapper = [sys.executable, "-m", "spotrun", "agent", "wrap", "--run-dir", str(run_dir)]
    proc = subprocess.Popen(
        [*wrapper, "--", sys.executable, "-c", JOB],
        cwd=run_dir,
        stdout=subprocess.DEVNULL,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    log = run_dir / "job.log"
    wait_for(lambda: log.exists() and b"working" in log.read_bytes(), timeout=30)
    return proc


def _watcher(lab: Lab, instance_id: str, run_dir: Path, **options: object) -> Watcher:
    config = WatchConfig(
        run_dir=run_dir,
        run_id="w4tcher00001",
        metadata_url=lab.hosts.imds(instance_id).url,
        poll_s=0.2,
        **options,  # type: ignore[arg-type]
    )
    return aws_watcher(config, bucket=lab.bucket, region="us-east-1")


def _stored(lab: Lab) -> set[str]:
    listing = lab.s3.list_objects_v2(Bucket=lab.bucket, Prefix="runs/w4tcher00001/")
    return {o["Key"].split("w4tcher00001/", 1)[1] for o in listing.get("Contents", [])}


def test_imds_client_needs_its_token_and_reads_values(aws_env: Env, lab: Lab) -> None:
    instance_id = _instance(lab, aws_env)
    imds = Imds(lab.hosts.imds(instance_id).url)
    assert imds.get("meta-data/instance-id") == instance_id
    assert imds.get("meta-data/spot/instance-action") is None  # 404: no notice
    with pytest.raises(MetadataError):
        Imds("http://127.0.0.1:9", timeout_s=0.5).get("meta-data/instance-id")


def test_notice_checkpoints_the_job_and_stores_it(aws_env: Env, lab: Lab, tmp_path: Path) -> None:
    instance_id = _instance(lab, aws_env)
    run_dir = tmp_path / "run"
    job = _job(run_dir)
    watcher = _watcher(lab, instance_id, run_dir)
    assert watcher.step() and not (run_dir / "notice.json").exists()  # nothing yet
    lab.interruptions.interrupt(instance_id, notice_s=30.0)
    assert watcher.step()  # the notice: checkpoint, upload; EC2 ends the instance later
    assert job.wait(timeout=10) == 75
    notice = json.loads((run_dir / "notice.json").read_text())
    assert notice["instance_id"] == instance_id and notice["action"] == "terminate"
    assert notice["checkpointed"] is True
    assert json.loads((run_dir / "exit.json").read_text())["exit_code"] == 75
    stored = _stored(lab)
    assert "checkpoints/ckpt-000000007.pt" in stored
    assert f"instances/{instance_id}/notice.json" in stored
    assert f"instances/{instance_id}/exit.json" in stored
    (item,) = lab.instances("w4tcher00001")
    assert item["State"]["Name"] == "running"  # a notice never ends the instance itself


@pytest.mark.parametrize(
    ("options", "why", "said"),
    [
        ({"no_progress_s": 0.5}, "no-progress", "made no progress"),
        ({"deadline": 1.0}, "deadline", "max-hours or budget cap"),
    ],
)
def test_a_stalled_job_or_the_cap_ends_the_instance(
    aws_env: Env, lab: Lab, tmp_path: Path, options: dict[str, float], why: str, said: str
) -> None:
    """No controller anywhere: the job's files stop moving (it sleeps), or the cap passes."""
    instance_id = _instance(lab, aws_env)
    run_dir = tmp_path / "run"
    job = _job(run_dir)
    watcher = _watcher(lab, instance_id, run_dir, **options)
    wait_for(lambda: watcher.step() is False, 30, "the watcher to end its instance")
    assert job.wait(timeout=10) == 75  # after the job checkpointed
    record = json.loads((run_dir / "self-terminated.json").read_text())
    assert record["why"] == why and said in record["reason"], record
    assert record["instance_id"] == instance_id and record["exit_code"] == 75
    stored = _stored(lab)
    assert "checkpoints/ckpt-000000007.pt" in stored
    for name in ("self-terminated.json", "exit.json", "job.log"):
        assert f"instances/{instance_id}/{name}" in stored, stored
    (item,) = lab.instances("w4tcher00001")
    assert item["State"]["Name"] in ("shutting-down", "terminated")


def test_a_moving_job_runs_on_with_no_controller_and_an_ended_one_ends_after_the_grace(
    aws_env: Env, lab: Lab, tmp_path: Path
) -> None:
    """The job's log moves and nobody asks after it (no controller, no heartbeat) for well over
    the no-progress time: it runs on. Once it has ended and nobody collected it within the
    grace, the instance ends itself."""
    instance_id = _instance(lab, aws_env)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    watcher = _watcher(lab, instance_id, run_dir, no_progress_s=1.0, end_grace_s=0.5)
    log = run_dir / "job.log"
    log.write_text("step 0\n")
    assert watcher.step()  # asks IMDS too: no notice, the job moves
    # A driven clock: a line every 0.2 s of it for three times the no-progress time (the
    # log's mtime set to it), so a stall of this machine cannot open a gap of 1 s.
    now = watcher.started
    for line in range(1, 16):
        now += 0.2
        with log.open("a") as fh:
            fh.write(f"step {line}\n")
        os.utime(log, (now, now))
        assert watcher.check_lifetime(now) is None, f"ended a job that moves (line {line})"
    still = watcher.check_lifetime(now + 1.0)  # then silent for the no-progress time
    assert still is not None and still.why == "no-progress", still
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')
    (run_dir / "exit.json").write_text(json.dumps({"exit_code": 0}))
    assert watcher.step()  # the grace starts
    wait_for(lambda: watcher.step() is False, 30, "the watcher to end its instance")
    record = json.loads((run_dir / "self-terminated.json").read_text())
    assert record["why"] == "job-ended" and record["exit_code"] == 0, record
    assert f"instances/{instance_id}/metrics.jsonl" in _stored(lab)
    (item,) = lab.instances("w4tcher00001")
    assert item["State"]["Name"] in ("shutting-down", "terminated")
