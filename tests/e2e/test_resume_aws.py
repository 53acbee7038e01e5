"""`spotrun resume` in the lab (moto's EC2 and S3, an sshd host per instance): a stopped run's
instance is gone, so the resume gets a new one, the newest checkpoint is put back on it
(the same path as a spot replacement) and training goes on from there to the end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spotlab import Lab
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_stopped_aws_run_resumes_on_a_new_instance_from_its_checkpoint(
    aws_env: Env, lab: Lab
) -> None:
    env = aws_env
    args = ["--cloud", "aws", "-d", "--name", "far", "--set", "epochs=400"]
    run_id = env.cli("launch", "digits-fast", *args, check=True).stdout.strip()
    run_dir = env.home / "runs" / run_id
    wait_for(lambda: _metrics(run_dir), timeout=240, what="the first epoch, synced back")
    assert env.cli("stop", "far").returncode == 0
    (first,) = lab.instances(run_id)
    assert first["State"]["Name"] == "terminated"
    stopped_epoch = _metrics(run_dir)[-1]["epoch"]

    target = stopped_epoch + 1
    proc = env.cli("resume", "far", "--set", f"epochs={target}", timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "succeeded" in proc.stdout and f"epoch {target}/{target}" in proc.stdout

    status = json.loads(env.cli("status", "far", "--json", check=True).stdout)
    assert (status["id"], status["state"]) == (run_id, "succeeded")
    instances = lab.instances(run_id)
    assert len(instances) == 2 and {i["State"]["Name"] for i in instances} == {"terminated"}
    (second,) = [i for i in instances if i["InstanceId"] != first["InstanceId"]]
    restored = [e["message"] for e in status["events"] if e["kind"] == "resume"]
    assert any(f"onto {second['InstanceId']}" in m for m in restored), restored
    assert [m["epoch"] for m in _metrics(run_dir)] == list(range(1, target + 1))
    assert "resumed at epoch" in (run_dir / "job.log").read_text()
    # The run's cost is both instances': a compute line for each.
    billed = {c["instance_id"] for c in status["cost_lines"] if c["kind"] == "compute"}
    assert billed == {first["InstanceId"], second["InstanceId"]}
