"""The controller on an on-demand instance of its own (`spotrun controller up --on aws`), in the
lab: the instance becomes a lab host, its role (the lab's controller profile) holds the
README's user policy, and IAM is enforced (a refused call fails the lab fixture's teardown).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from spotlab import Lab
from spotlab import spot as spotlab
from spotlab.lab import CONTROLLER_PROFILE, FAKE_CREDENTIALS
from spotrun.remote_controller.record import load_record
from tests.conftest import Env
from tests.controller_lab import controller_lab
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


def test_controller_on_its_own_instance_runs_a_job_and_down_terminates_it(
    env: Env, lab: Lab
) -> None:
    with controller_lab(env, lab):
        _scenario(env, lab)


def _controllers(lab: Lab) -> list[dict[str, Any]]:
    """This lab's controller instances (labs of other tests share the moto server)."""
    assert lab.network is not None
    found = lab.ec2.describe_instances(
        Filters=[
            {"Name": "tag:spotrun:role", "Values": ["controller"]},
            {"Name": "vpc-id", "Values": [lab.network.vpc_id]},
        ]
    )["Reservations"]
    return [i for r in found for i in r["Instances"]]


def _scenario(env: Env, lab: Lab) -> None:
    # an instance that cannot become the controller (no such python there) is terminated
    bad = env.cli(
        "controller", "up", "--on", "aws", "--instance-type", "m6i.large",
        "--python", "/no/such/python3", timeout=300,
    )  # fmt: skip
    assert bad.returncode != 0 and "/no/such/python3" in bad.stderr, bad.stderr
    assert load_record(env.home) is None
    (failed,) = _controllers(lab)
    assert failed["InstanceType"] == "m6i.large" and failed["State"]["Name"] == "terminated"
    tag = [{"Name": "tag:spotrun:role", "Values": ["controller"]}]
    assert lab.ec2.describe_key_pairs(Filters=tag)["KeyPairs"] == []
    assert lab.ec2.describe_security_groups(Filters=tag)["SecurityGroups"] == []

    up = env.cli("controller", "up", "--on", "aws", check=True, timeout=300)
    record = load_record(env.home)
    assert record is not None and record.kind == "aws" and record.instance_id, up.stdout
    instance_id, resource = record.instance_id, str(record.resource_id)
    (item,) = lab.instances(resource, states=("running",))
    tags = {t["Key"]: t["Value"] for t in item["Tags"]}
    assert tags["spotrun:role"] == "controller" and tags["spotrun:owner"], tags
    assert item["IamInstanceProfile"]["Arn"].endswith(CONTROLLER_PROFILE)
    # the cheapest type of the shipped table with 2 vCPUs and 2 GiB, at its list price
    assert record.instance_type == item["InstanceType"] and (record.usd_per_hour or 0) > 0
    host = lab.hosts.of(instance_id)
    # none of this machine's credentials went there: only config.toml
    copied = host.path("/root/.spotrun/config.toml").read_text()
    assert FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in copied

    # a run launched through the laptop's CLI is driven by the instance's role
    launch = ["launch", "digits-fast", "--cloud", "aws", "-d"]
    for override in spotlab.OVERRIDES:
        launch += ["--set", override if not override.startswith("epochs=") else "epochs=1"]
    run_id = env.cli(*launch, check=True, timeout=300).stdout.strip()

    def finished() -> dict[str, object] | None:
        listed = env.cli("ls", "--all", "--json", timeout=120)
        rows = json.loads(listed.stdout or "[]") if listed.returncode == 0 else []
        row = next((r for r in rows if r.get("id") == run_id), None)
        return row if row and row.get("state") in ("succeeded", "failed") else None

    row = wait_for(finished, timeout=300, what=f"run {run_id} to end on the controller")
    assert row["state"] == "succeeded", row
    cost = env.cli("cost", timeout=120, check=True).stdout
    assert f"controller instance {instance_id}" in cost and "so far" in cost, cost
    rows = json.loads(env.cli("cost", "--json", timeout=120, check=True).stdout)
    assert rows and "controller instance" not in json.dumps(rows)  # --json: the rows only
    # gc there sees the controller's own instance as no orphan
    gc = env.cli("gc", timeout=120, check=True)
    assert instance_id not in gc.stdout, gc.stdout

    status = env.cli("controller", "status", "--json", check=True, timeout=120)
    there = json.loads(status.stdout)
    assert there["reachable"] and there["instance_id"] == instance_id
    assert there["hours"] > 0 and there["usd"] > 0, there
    text = env.cli("controller", "status", check=True, timeout=120).stdout
    assert f"instance    {instance_id}" in text and "on demand so far" in text, text

    # The instance's machine dies while EC2 says it runs: `down` says so and what to do;
    # --force terminates it anyway (a controller instance must never be left billing).
    lab.hosts.live[instance_id].stop()
    refused = env.cli("controller", "down", timeout=600)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "does not answer" in refused.stderr and "--force" in refused.stderr, refused.stderr
    assert load_record(env.home) is not None
    env.cli("controller", "down", "--force", check=True, timeout=600)
    assert load_record(env.home) is None
    (ended,) = lab.instances(resource)
    assert ended["State"]["Name"] == "terminated"
    groups = lab.ec2.describe_security_groups(
        Filters=[{"Name": "tag:spotrun:run-id", "Values": [resource]}]
    )["SecurityGroups"]
    pairs = lab.ec2.describe_key_pairs(
        Filters=[{"Name": "tag:spotrun:run-id", "Values": [resource]}]
    )
    assert groups == [] and pairs["KeyPairs"] == [], (groups, pairs)
