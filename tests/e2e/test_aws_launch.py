"""`spotrun launch --cloud aws` in the lab: moto's EC2 API, a real sshd host per instance,
real tmux on the host, real torch. Everything is checked through the EC2/S3 APIs and the host."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from spotlab import Lab
from spotlab.fixtures import use_lab
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

SHORT = ["--set", "epochs=2"]


def _run(env: Env, ref: str) -> dict[str, Any]:
    return next(r for r in env.runs() if r["id"] == ref or r["name"] == ref)


def _status(env: Env, ref: str) -> dict[str, Any]:
    return json.loads(env.cli("status", ref, "--json", check=True).stdout)


def _tags(item: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in item.get("Tags", [])}


def _host_tmux(lab: Lab, instance_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    """tmux of the host itself, through its server's socket in the host's own /tmp."""
    socket = lab.hosts.of(instance_id).path("/tmp/tmux-0/default")
    return subprocess.run(["tmux", "-S", str(socket), *args], capture_output=True, text=True)


def test_launch_digits_fast_on_aws_end_to_end(aws_env: Env, lab: Lab) -> None:
    env = aws_env
    # A tracker's variable in the launching shell, and --env: both reach the job's 0600
    # environment file on the instance (no tracker is configured by these two).
    env.vars["MLFLOW_EXPERIMENT_NAME"] = "lab-experiment"
    launched = env.cli(
        "launch", "digits-fast", "--cloud", "aws", "--detach", "--env", "NOTE=hi", *SHORT
    )
    assert launched.returncode == 0, launched.stderr
    assert "carrying MLFLOW_EXPERIMENT_NAME into the job's environment" in launched.stderr
    run_id = launched.stdout.strip()
    wait_for(
        lambda: env.run_state(run_id) in ("running", "syncing", "succeeded"),
        timeout=60,
        what="the job to start on the instance",
    )

    # While it runs: what EC2 says about the instance and everything around it.
    (item,) = lab.instances(run_id)
    instance_id = item["InstanceId"]
    assert item["InstanceLifecycle"] == "spot"
    tags = _tags(item)
    assert tags["spotrun:run-id"] == run_id
    assert tags["spotrun:owner"] and tags["spotrun:expires"].endswith("Z")
    assert item["KeyName"] == f"spotrun-{run_id}"
    assert item["MetadataOptions"]["HttpTokens"] == "required"
    assert item["PrivateIpAddress"].startswith("127.")
    (group,) = lab.ec2.describe_security_groups(
        GroupIds=[g["GroupId"] for g in item["SecurityGroups"]]
    )["SecurityGroups"]
    assert _tags(group)["spotrun:run-id"] == run_id
    (rule,) = group["IpPermissions"]
    assert (rule["IpProtocol"], rule["FromPort"], rule["ToPort"]) == (
        "tcp",
        lab.hosts.ssh_port,
        lab.hosts.ssh_port,
    )
    assert [r["CidrIp"] for r in rule["IpRanges"]] == ["127.0.0.1/32"]
    (volume,) = lab.ec2.describe_volumes(
        Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}]
    )["Volumes"]
    assert volume["Encrypted"] is True and volume["Size"] == 30
    assert _tags(volume)["spotrun:run-id"] == run_id
    (key_pair,) = lab.ec2.describe_key_pairs(KeyNames=[f"spotrun-{run_id}"])["KeyPairs"]
    assert key_pair["KeyType"] == "ed25519" and _tags(key_pair)["spotrun:run-id"] == run_id
    key_file = env.home / "ssh" / run_id / "id_ed25519"
    assert key_file.stat().st_mode & 0o777 == 0o600

    # The job runs in tmux on the host (its own tmux server), not on this machine.
    session = f"spotrun-{run_id}"
    host = lab.hosts.of(instance_id)
    if env.run_state(run_id) == "running":
        assert (
            session in _host_tmux(lab, instance_id, "list-sessions", "-F", "#{session_name}").stdout
        )
    assert session not in env.sessions()

    wait_for(
        lambda: env.run_state(run_id) in ("succeeded", "failed"), timeout=120, what="the run to end"
    )
    run = _run(env, run_id)
    status = _status(env, run_id)
    assert run["state"] == "succeeded", (run, status["events"])
    assert run["cloud"] == "aws" and run["metrics"]["epoch"] == 2, run
    # Priced from the spot price history of its type in its zone (the lab's market).
    assert run["cost_usd"] is not None and 0 < run["cost_usd"] < 0.01, (run, status["events"])

    # Metrics and checkpoints came back, incrementally synced, and the log.
    run_dir = env.home / "runs" / run_id
    metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics] == [1, 2]
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("ckpt-*.pt"))
    assert json.loads((run_dir / "exit.json").read_text())["exit_code"] == 0
    remote_dir = f"/root/.spotrun/runs/{run_id}"
    job = json.loads(host.path(f"{remote_dir}/job.json").read_text())  # by the wrapper in tmux
    job_env = host.path(f"{remote_dir}/.job-env.json")
    assert job_env.stat().st_mode & 0o077 == 0
    carried = json.loads(job_env.read_text())
    assert (carried["MLFLOW_EXPERIMENT_NAME"], carried["NOTE"]) == ("lab-experiment", "hi")
    assert job["argv"] == [
        "/root/.spotrun/venv/bin/python",  # spotrun's venv over the image's python
        *["-m", "spotrun", "train", "digits-fast", "--run-dir", remote_dir, "--set", "epochs=2"],
    ]
    remote_log = host.path(f"{remote_dir}/job.log").read_bytes()
    assert (run_dir / "job.log").read_bytes() == remote_log
    assert "training digits-fast" in env.cli("logs", run_id, check=True).stdout

    # The checkpoints are in S3 too (the instance uploaded them, with its role's credentials).
    stored = lab.s3.list_objects_v2(Bucket=lab.bucket, Prefix=f"runs/{run_id}/")
    keys = {o["Key"] for o in stored.get("Contents", [])}
    for ckpt in (run_dir / "checkpoints").glob("ckpt-*.pt"):
        assert f"runs/{run_id}/checkpoints/{ckpt.name}" in keys

    # Terminated, confirmed by EC2; the host and everything on it is gone; nothing left.
    (item,) = lab.instances(run_id)
    assert item["State"]["Name"] == "terminated"
    assert not host.alive
    assert (
        lab.ec2.describe_security_groups(
            Filters=[{"Name": "tag:spotrun:run-id", "Values": [run_id]}]
        )["SecurityGroups"]
        == []
    )
    assert (
        lab.ec2.describe_key_pairs(Filters=[{"Name": "tag:spotrun:run-id", "Values": [run_id]}])[
            "KeyPairs"
        ]
        == []
    )

    assert [t["to"] for t in status["transitions"]] == [
        "planned",
        "requested",
        "provisioning",
        "bootstrapping",
        "running",
        "syncing",
        "succeeded",
    ]
    (inst,) = status["instances"]
    assert inst["id"] == instance_id and inst["market"] == "spot" and inst["state"] == "terminated"
    assert inst["terminated_at"] >= inst["launched_at"]

    # `spotrun rm` forgets it everywhere: its stored files in S3 (the README user may delete
    # under runs/*, IAM enforced), its SSH keys and its folder here.
    assert (env.home / "ssh" / run_id).is_dir()
    removed = env.cli("rm", run_id)
    assert removed.returncode == 0, removed.stderr
    left = lab.s3.list_objects_v2(Bucket=lab.bucket, Prefix=f"runs/{run_id}/")
    assert left.get("KeyCount") == 0, left.get("Contents")
    assert not (env.home / "ssh" / run_id).exists() and not run_dir.exists()


def _crash_after_ec2_made_it(env: Env, lab: Lab) -> str:
    """Launch; EC2 makes the instance and its answer is held (the supervisor has not heard of
    it) while the supervisor is SIGKILLed; then any command restarts the supervisor."""
    held = lab.faults.hold("RunInstances", forwarded=True)
    run_id = env.cli(
        "launch", "digits-fast", "--cloud", "aws", "-d", "--set", "epochs=1", check=True
    ).stdout.strip()
    wait_for(lambda: held.wait_arrived(0.1), timeout=60, what="the supervisor's RunInstances")
    wait_for(lambda: lab.instances(run_id), timeout=30, what="EC2 to make the instance")
    assert env.run_state(run_id) == "requested"
    os.kill(_supervisor_pid(env, run_id), signal.SIGKILL)
    held.release()  # the answer goes to a dead process
    env.cli("ls", check=True)  # any command notices the dead supervisor and starts another
    return run_id


def _goes_on_with_the_one_instance(env: Env, lab: Lab, run_id: str) -> None:
    wait_for(
        lambda: env.run_state(run_id) in ("running", "syncing", "succeeded", "failed"),
        timeout=60,
        what="the restarted supervisor to start the job",
    )
    status = _status(env, run_id)
    assert env.run_state(run_id) != "failed", [
        status["message"],
        *[e["message"] for e in status["events"]],
    ]
    (item,) = lab.instances(run_id)  # the instance made before the crash, and no other
    assert item["State"]["Name"] == "running"
    # the dead supervisor was noticed (by the command that started another) before the job ran
    events = [e["message"] for e in status["events"]]
    assert any("supervisor was not running" in e for e in events), events


def test_repeat_after_a_crash_makes_no_second_instance(aws_env: Env, lab: Lab) -> None:
    """The supervisor dies after EC2 made the instance but before it heard back; the next
    spotrun command restarts it, finds the instance by its tag, and the run goes on with it."""
    run_id = _crash_after_ec2_made_it(aws_env, lab)
    _goes_on_with_the_one_instance(aws_env, lab, run_id)
    assert lab.front.actions.count("RunInstances") == 1


def test_a_repeat_ec2_does_not_list_yet_gets_the_same_instance_by_its_token(
    env: Env, make_lab: Callable[..., Lab]
) -> None:
    """As above, but EC2's listing has not caught up when the restarted supervisor looks
    (eventual consistency): it asks RunInstances again, with the same ClientToken, and EC2
    answers with the first call's instance instead of making a second."""
    lab = make_lab(not_found_s=3600.0)  # EC2 catches up only when the test says so
    with use_lab(env, lab):
        run_id = _crash_after_ec2_made_it(env, lab)
        wait_for(
            lambda: lab.front.consistency.repeats,
            timeout=60,
            what="the restarted supervisor's RunInstances with the first call's token",
        )
        lab.front.consistency.not_found_s = 0.0  # EC2 knows the instance now
        _goes_on_with_the_one_instance(env, lab, run_id)
    tokens = [r["ClientToken"] for r in lab.front.run_requests]
    assert len(tokens) == 2 and tokens[0] == tokens[1], lab.front.run_requests
    assert lab.front.consistency.repeats == 1


def test_without_an_instance_profile_the_run_trains_and_says_what_its_instance_cannot(
    aws_env: Env, lab: Lab
) -> None:
    """No aws.instance_profile: EC2 gives the instance no credentials (the lab's IMDS has no
    iam/ folder then). The run trains and syncs over SSH; its instance stores nothing in S3,
    makes no AWS call at all, and the launch says so instead of leaving it to be found."""
    env = aws_env
    lab.config.write_config(env.home, instance_profile=None)
    launched = env.cli("launch", "digits-fast", "--cloud", "aws", "--set", "epochs=1", timeout=600)
    assert launched.returncode == 0, launched.stderr
    (run,) = env.runs()
    assert run["state"] == "succeeded", run
    events = [e["message"] for e in _status(env, run["id"])["events"]]
    assert any(e.startswith("no aws.instance_profile") and lab.bucket in e for e in events), events
    assert "no aws.instance_profile" in launched.stdout + launched.stderr
    assert list((env.home / "runs" / run["id"] / "checkpoints").glob("ckpt-*.pt"))  # synced
    stored = lab.s3.list_objects_v2(Bucket=lab.bucket, Prefix=f"runs/{run['id']}/")
    assert stored.get("KeyCount") == 0
    assert lab.front.iam.denied == []  # unsigned: the instance had nothing to sign with


def _supervisor_pid(env: Env, run_id: str) -> int:
    import sqlite3

    with sqlite3.connect(env.home / "ledger.db") as db:
        (pid,) = db.execute("SELECT supervisor_pid FROM runs WHERE id = ?", (run_id,)).fetchone()
    return int(pid)


def test_attach_follow_logs_and_stop_on_aws(aws_env: Env, lab: Lab) -> None:
    env = aws_env
    run_id = env.cli(
        "launch",
        "digits-fast",
        "--cloud",
        "aws",
        "-d",
        "--name",
        "long",
        "--set",
        "epochs=400",
        check=True,
    ).stdout.strip()
    wait_for(lambda: env.run_state(run_id) == "running", timeout=60, what="the job to start")
    (item,) = lab.instances(run_id)
    instance_id = item["InstanceId"]
    session = f"spotrun-{run_id}"

    # `attach`: the user's own ssh, the run's key and pinned host key, into the remote session
    # (here read-only: tmux's own read-only client on the host).
    env.tmux(
        "-L",
        "outer",
        "new-session",
        "-d",
        "-x",
        "150",
        "-y",
        "40",
        f"{sys.executable} -m spotrun attach long --read-only; sleep 60",
    )
    try:
        clients = wait_for(
            lambda: _host_tmux(
                lab, instance_id, "list-clients", "-t", f"={session}", "-F", "#{client_readonly}"
            ).stdout.strip(),
            timeout=30,
            what="a client attached to the session on the host",
        )
        assert clients == "1"  # read-only
        wait_for(
            lambda: "epoch" in env.tmux("-L", "outer", "capture-pane", "-p").stdout,
            timeout=60,
            what="training output in the attached terminal",
        )
    finally:
        env.tmux("-L", "outer", "kill-server")

    follower = env.popen("logs", "-f", "long")  # follows the instance's log as it syncs
    stopped = env.cli("stop", "long", timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    out, _ = follower.communicate(timeout=60)  # returns by itself once the run has ended
    assert "training digits-fast" in out and "epoch 1/400" in out

    assert env.run_state(run_id) == "stopped"
    run_dir = env.home / "runs" / run_id
    assert list((run_dir / "checkpoints").glob("ckpt-*.pt")), "the trainer checkpointed on stop"
    assert "stop requested by SIGTERM" in (run_dir / "job.log").read_text()
    (item,) = lab.instances(run_id)
    assert item["State"]["Name"] == "terminated"
    assert not lab.hosts.of(instance_id).alive
