"""`spotrun sweep --nodes N --cloud aws` in the lab: each trial is an N-node cluster run of its
own (N instances of one offer in one zone and placement group, torchrun across the lab's
hosts), never packed; the printed plan counts N instances per trial; bad input is refused
before anything is made."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spotlab import Lab
from spotlab.fixtures import use_lab
from spotrun.core.config import load_settings
from spotrun.core.errors import UsageError
from spotrun.core.launch_request import LaunchRequest
from spotrun.service import sweeps as service
from spotrun.store.ledger import Ledger
from tests.cluster_cases import BAD
from tests.conftest import Env

pytestmark = pytest.mark.slow

# gloo in the lab talks over the loopback interface (the nodes' 127.x addresses live there)
CLUSTER = {"cluster_env": {"GLOO_SOCKET_IFNAME": "lo"}, "end_grace_s": 600.0}


def test_a_two_node_sweep_trial_trains_as_one_cluster_run(env: Env, lab: Lab) -> None:
    lab.front.quotas.values["L-34B43A08"] = 4.0  # standard spot vCPUs: two c6i.large fit
    with use_lab(env, lab, **CLUSTER):
        proc = env.cli(
            "sweep", "digits-fast", "--cloud", "aws", "--nodes", "2", "--grid", "lr=0.2",
            "--set", "epochs=1", "--set", "threads=1", "--name", "pairs",
            timeout=300,
        )  # fmt: skip
        status: dict[str, Any] = json.loads(
            env.cli("sweep", "status", "pairs", "--json", check=True).stdout
        )
        (row,) = status["leaderboard"]
        run_id = row["run_id"]
        events: list[Any] = []
        if row["status"] != "succeeded":  # what the run and its nodes said, to see why
            events = json.loads(env.cli("status", run_id, "--json").stdout or "{}").get(
                "events", []
            )
            events.append(env.cli("logs", run_id, "--node", "all").stdout[-4000:])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The plan printed at the start says what a trial is and what it costs: two instances.
    said = " ".join(proc.stdout.split())
    assert "1 trials of 2 nodes each, 4 at once" in said, said
    assert (
        "one 2-node cluster per trial: 2 x c6i.large in us-east-1c (0 GPU each, $0.0298/h "
        "each, $0.0596/h per trial); 1 trial(s) at once: up to 2 instances"
    ) in said
    plan = status["plan"]
    assert status["state"] == "completed", status["message"]
    assert plan["nodes"] == 2 and plan["slots"] == 1  # "slots": trials per instance
    assert plan["usd_per_trial_hour"] == pytest.approx(2 * 0.0298)
    assert status["max_cost_usd"] is None
    assert row["status"] == "succeeded" and row["test_acc"] is not None, events

    # The trial is one cluster run: both nodes asked in one RunInstances in one placement
    # group, both in one zone, both ended with the trial; no pack.
    items = lab.instances(run_id)
    assert len(items) == 2 and {i["State"]["Name"] for i in items} == {"terminated"}
    (zone,) = {i["Placement"]["AvailabilityZone"] for i in items}
    (request,) = [r for r in lab.front.run_requests if r.get("Placement.GroupName")]
    assert (request["MinCount"], request["MaxCount"]) == ("2", "2")
    assert request["Placement.GroupName"] == f"spotrun-{run_id}-{zone}"
    assert request["Placement.GroupName"] in lab.front.placement.deleted
    home = env.home / "runs" / run_id
    layout = json.loads((home / "cluster.json").read_text())
    assert sorted(n["id"] for n in layout["nodes"]) == sorted(i["InstanceId"] for i in items)
    assert "on 2 processes" in (home / "job.log").read_text()  # torchrun across both nodes
    with Ledger(load_settings(env.home)) as ledger:
        run = ledger.get_run(run_id)
        billed = {line.instance_id for line in ledger.cost_lines(run_id) if line.instance_id}
    assert run.spec.resources.nodes == 2 and run.sweep_id == status["id"]
    assert billed == {i["InstanceId"] for i in items}  # the trial's cost: both nodes
    assert row["cost_usd"] > 0


def test_bad_sweep_nodes_are_refused_before_anything_is_made(aws_env: Env, lab: Lab) -> None:
    lab.front.quotas.values["L-34B43A08"] = 4.0  # two c6i.large fit, three do not
    proc = aws_env.cli(
        "sweep", "digits-fast", "--cloud", "aws", "--nodes", "0", "--grid", "lr=0.1,0.2", "-d"
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--nodes must be a whole number of at least 1, got 0" in proc.stderr
    # The same checks in the library call the command makes (no process start per case).
    settings = load_settings(aws_env.home)
    for resources, recipe, said in BAD:
        with pytest.raises(UsageError) as refused:
            service.prepare_sweep(
                settings, recipe, LaunchRequest(cloud="aws", **resources), grid=["lr=0.1,0.2"]
            )
        assert said in " ".join(refused.value.user_message().split())
    assert json.loads(aws_env.cli("sweep", "ls", "--json", check=True).stdout) == []
    assert lab.instances() == []
    assert "RunInstances" not in lab.front.actions
