"""`spotrun launch --nodes N --cloud aws` in the lab: N instances of one offer in one zone in a
cluster placement group, torchrun (c10d rendezvous, gloo) on every node across the lab's
loopback addresses, rank 0's metrics and checkpoints brought home; all or nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spotlab import Lab
from spotlab.fixtures import use_lab
from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from tests.cluster_cases import BAD
from tests.conftest import REPO, Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

# Two epochs: the nodes train across an epoch boundary (a new shuffle, the schedule goes on)
OVERRIDES = ["epochs=2", "threads=1"]
# The interrupted run trains longer and wider, so each of its losses lands mid-training
LONGER = ["epochs=12", "threads=1", "model_options.width=64"]
COMPARED = ("step", "epoch", "train_loss", "test_loss", "test_acc", "lr")
# gloo in the lab talks over the loopback interface (the nodes' 127.x addresses live there)
CLUSTER = {"cluster_env": {"GLOO_SOCKET_IFNAME": "lo"}, "end_grace_s": 600.0}


def _set_args(overrides: list[str] = OVERRIDES) -> list[str]:
    return [arg for item in overrides for arg in ("--set", item)]


def _final(path: Path) -> dict[str, Any]:
    last = json.loads(path.read_text().splitlines()[-1])
    return {k: last[k] for k in COMPARED}


def _two_processes(work: Path, overrides: list[str]) -> dict[str, Any]:
    """The recipe trained uninterrupted by torchrun as 2 processes on this machine."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
         "-m", "spotrun", "train", "digits-fast", "--run-dir", str(work),
         *_set_args(overrides)],
        check=True, capture_output=True, env=env, cwd=REPO, timeout=600,
    )  # fmt: skip
    return _final(work / "metrics.jsonl")


@pytest.fixture(scope="module")
def longer_reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _two_processes(tmp_path_factory.mktemp("longer"), LONGER)


@pytest.fixture(scope="module")
def two_process_reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _two_processes(tmp_path_factory.mktemp("reference"), OVERRIDES)


def test_two_nodes_train_with_torchrun_across_the_lab(
    env: Env, lab: Lab, two_process_reference: dict[str, Any]
) -> None:
    """Spot capacity for only one c6i.large in the cheapest zone: EC2 starts both nodes there
    and ends one at once (a partial fill); spotrun terminates the other at once and takes the
    next zone, where the two nodes train together."""
    lab.capacity.limit_fill("c6i.large", "us-east-1c", 1)
    with use_lab(env, lab, **CLUSTER):
        run_id = env.cli(
            "launch", "digits-fast", "--nodes", "2", "--cloud", "aws", "-d", *_set_args(),
            check=True,
        ).stdout.strip()  # fmt: skip
        wait_for(
            lambda: env.run_state(run_id) in ("succeeded", "failed"),
            timeout=300,
            what="the two-node run to end",
        )
        status = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    events = [e["message"] for e in status["events"]]
    assert status["state"] == "succeeded", "\n".join([status["message"] or "", *events])

    # The partial fill: both of its instances ended at once, the next zone taken.
    partial = [
        i for i in lab.instances(run_id) if i["Placement"]["AvailabilityZone"] == "us-east-1c"
    ]
    items = [i for i in lab.instances(run_id) if i["Placement"]["AvailabilityZone"] != "us-east-1c"]
    assert any("partial fill: EC2 started 1 of 2 c6i.large in us-east-1c" in e for e in events), (
        events
    )
    assert len(partial) == 2 and all(i["State"]["Name"] == "terminated" for i in partial)
    assert "Server.InsufficientInstanceCapacity" in {i["StateReason"]["Code"] for i in partial}
    ledger_ids = {i.id for i in _instances(env, run_id)}
    assert ledger_ids == {i["InstanceId"] for i in lab.instances(run_id)}  # all four, partial too

    # One RunInstances for both nodes each time: one offer, one zone, a placement group each.
    requests = [
        r
        for r in lab.front.run_requests
        if r.get("Placement.GroupName", "").endswith(
            tuple(f"{run_id}-{z}" for z in ("us-east-1a", "us-east-1b", "us-east-1c"))
        )
    ]
    assert [(r["MinCount"], r["MaxCount"]) for r in requests] == [("2", "2"), ("2", "2")]
    assert len(items) == 2
    zones = {i["Placement"]["AvailabilityZone"] for i in items}
    assert len(zones) == 1 and len({i["InstanceType"] for i in items}) == 1
    (zone,) = zones
    assert [r["Placement.GroupName"] for r in requests] == [
        f"spotrun-{run_id}-us-east-1c",
        f"spotrun-{run_id}-{zone}",
    ]
    for request in requests:  # gone with the run
        assert request["Placement.GroupName"] in lab.front.placement.deleted
    assert all(i["State"]["Name"] == "terminated" for i in items)
    # the nodes reach each other on every port: the run's group admits itself
    allowed = [
        r
        for r in lab.front.actions_params
        if r.get("Action") == "AuthorizeSecurityGroupIngress"
        and r.get("IpPermissions.1.IpProtocol") == "-1"
    ]
    assert allowed and all(r["IpPermissions.1.Groups.1.GroupId"] == r["GroupId"] for r in allowed)

    # torchrun ran on both hosts, node 0 hosting the rendezvous; rank 0's metrics came home.
    home = env.home / "runs" / run_id
    layout = json.loads((home / "cluster.json").read_text())
    assert [n["rank"] for n in layout["nodes"]] == [0, 1]
    ordered = sorted(items, key=lambda i: i["PrivateIpAddress"])
    assert [n["id"] for n in layout["nodes"]] == [i["InstanceId"] for i in ordered]
    for node in layout["nodes"]:
        host_dir = lab.hosts.of(node["id"]).path(f"/root/.spotrun/runs/{run_id}")
        log = (host_dir / "job.log").read_text()
        assert "torch.distributed.run" in (host_dir / "job.json").read_text()
        if node["rank"] == 1:
            assert not (host_dir / "checkpoints").exists() or not any(
                (host_dir / "checkpoints").iterdir()
            ), "only rank 0 writes checkpoints"
        else:
            assert "on 2 processes" in log
    assert _final(home / "metrics.jsonl") == two_process_reference
    assert any((home / "checkpoints").glob("ckpt-*.pt"))

    # `logs --node all` follows every node, each line labelled; a node it lacks is refused.
    both = env.cli("logs", run_id, "--node", "all", check=True).stdout.splitlines()
    assert any(line.startswith("[node 0] training digits-fast") for line in both), both
    for node in layout["nodes"]:
        on_host = lab.hosts.of(node["id"]).path(f"/root/.spotrun/runs/{run_id}/job.log")
        mine = [line for line in both if line.startswith(f"[node {node['rank']}] ")]
        assert [
            f"[node {node['rank']}] {line}" for line in on_host.read_text().splitlines()
        ] == mine
    assert "on 2 processes" in env.cli("logs", run_id, "--node", "0", check=True).stdout
    assert env.cli("logs", run_id, "--node", "2").returncode == 2

    # One run: its instances in the ledger, the two nodes in the cost.
    assert len(status["instances"]) == 4
    with Ledger(load_settings(env.home)) as ledger:
        lines = ledger.cost_lines(run_id)
    assert {line.instance_id for line in lines if line.instance_id} >= {
        i["InstanceId"] for i in items
    }


def test_bad_cluster_input_is_refused_with_nothing_launched(aws_env: Env, lab: Lab) -> None:
    from spotrun.core.errors import QuotaError, UsageError
    from spotrun.service.runs import LaunchRequest, prepare_launch

    lab.front.quotas.values["L-34B43A08"] = 4.0  # standard spot vCPUs: two c6i.large fit
    proc = aws_env.cli("launch", "digits-fast", "--nodes", "0", "--cloud", "aws", "-d")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--nodes must be a whole number of at least 1, got 0" in proc.stderr
    # The other checks in the library call the command makes (no process start per case).
    settings = load_settings(aws_env.home)
    for resources, recipe, said in BAD:  # a quota short of the nodes: the plan's refusal
        with pytest.raises((UsageError, QuotaError)) as refused:
            prepare_launch(settings, recipe, LaunchRequest(cloud="aws", **resources))
        assert said in " ".join(refused.value.user_message().split())
    assert lab.instances() == []
    assert aws_env.runs() == []
    assert "RunInstances" not in lab.front.actions


def test_the_quota_check_counts_the_vcpus_already_in_use(lab: Lab) -> None:
    """Standard spot quota of 6 vCPUs: two c6i.large nodes (4) fit beside one spot c6i.large
    in use (2), not beside two; on-demand instances and spot instances of other quotas (G)
    are not counted against it. The instances in use are in moto, outside the lab's VPC (no
    hosts), described by the check's own DescribeInstances."""
    from spotrun.cloud.aws.quotas import check_cluster_quota
    from spotrun.cloud.aws.session import AwsClients
    from spotrun.cloud.base import Offer
    from spotrun.core.config import aws_table
    from spotrun.core.errors import UsageError

    lab.front.quotas.values["L-34B43A08"] = 6.0
    spot = {"MarketType": "spot"}
    made: list[str] = []

    def run(kind: str, count: int, market: dict[str, str] | None = None) -> None:
        extra: dict[str, Any] = {"InstanceMarketOptions": market} if market else {}
        answer = lab.ec2.run_instances(
            ImageId=lab.image_id, InstanceType=kind, MinCount=count, MaxCount=count, **extra
        )
        made.extend(i["InstanceId"] for i in answer["Instances"])

    offer = Offer("aws", "c6i.large", "us-east-1", "us-east-1a", 0, None, None, 2, 4.0, 0.03, 0.085)
    try:
        run("c6i.large", 1, spot)
        run("m6i.large", 2)  # on-demand: another quota
        run("g4dn.xlarge", 1, spot)  # spot, but the G and VT quota
        with lab.config.environ():
            clients = AwsClients(aws_table(lab.config.settings()))
            check_cluster_quota(clients, offer, 2)  # 2 in use + 4 = 6: fits
            run("m6i.large", 1, spot)  # another standard family, the same quota
            with pytest.raises(UsageError) as refused:
                check_cluster_quota(clients, offer, 2)
    finally:  # the moto server outlives this lab: leave nothing running for the next test
        lab.ec2.terminate_instances(InstanceIds=made)
    said = refused.value.user_message()
    assert "2 x c6i.large need 4 vCPUs and 4 are in use (2 running or pending spot" in said
    assert "quota 'All Standard" in said and "of 6 vCPUs" in said


def test_a_vcpu_quota_too_small_for_the_cluster_launches_nothing(aws_env: Env, lab: Lab) -> None:
    """EC2 refuses the whole request (MinCount = N) with MaxSpotInstanceCountExceeded, the
    lab's Standard spot quota of 4 vCPUs (unreadable here) being short of 3 x 2: the run fails
    naming the quota and asking for the 6 vCPUs."""
    lab.capacity.set_vcpu_quota("L-34B43A08", 4, readable=False)
    run_id = aws_env.cli(
        "launch",
        "digits-fast",
        "--nodes",
        "3",
        "--set",
        "batch_size=66",
        "--cloud",
        "aws",
        "-d",
        check=True,
    ).stdout.strip()
    wait_for(lambda: aws_env.run_state(run_id) == "failed", timeout=60, what="the run to fail")
    status = json.loads(aws_env.cli("status", run_id, "--json", check=True).stdout)
    assert "vCPU quota" in status["message"], status
    assert status["message"].startswith("MaxSpotInstanceCountExceeded"), status
    assert "--quota-code L-34B43A08 --desired-value 6 " in status["message"], status
    assert lab.instances(run_id) == []


def test_lost_nodes_are_replaced_in_their_zone_and_then_the_whole_cluster_moves(
    env: Env, lab: Lab, longer_reference: dict[str, Any]
) -> None:
    """One run, three losses. A spot notice on node 1 mid-run: every rank stops at one step,
    rank 0 checkpoints, node 1 is replaced in the same zone and placement group, node 0's
    instance is kept, and the job resumes on the repaired cluster. Then the replacement stops
    answering while EC2 says it runs (its host dies): it alone is terminated and replaced, the
    job resumes from the last epoch's checkpoint. Then a notice on that one, with the zone out
    of capacity: after aws.cluster_replace_s the whole cluster moves to another zone (node 0 is
    checkpointed, collected, terminated). The job ends with the uninterrupted run's metrics."""
    reference = longer_reference
    settings = {**CLUSTER, "notice_poll_s": 0.5, "cluster_replace_s": 3.0, "unreachable_s": 4.0}
    with use_lab(env, lab, **settings):
        run_id = env.cli(
            "launch", "digits-fast", "--nodes", "2", "--cloud", "aws", "-d",
            *_set_args(LONGER), check=True,
        ).stdout.strip()  # fmt: skip
        home = env.home / "runs" / run_id
        node0, node1 = wait_for(lambda: _layout(home), timeout=180, what="the cluster to start")
        zone = lab.instances(run_id)[0]["Placement"]["AvailabilityZone"]
        on_node0 = lab.hosts.of(node0).path(f"/root/.spotrun/runs/{run_id}")
        wait_for(lambda: _epoch(on_node0 / "metrics.jsonl") >= 2, timeout=240, what="epoch 2")
        attached = _attach_check(env, run_id, node=1)  # `attach --node 1` reaches node 1's tmux
        lab.interruptions.interrupt(node1, notice_s=8.0)
        first = _repaired(home, on_node0, node0, node1, resumes=1)
        lab.hosts.of(first).stop()  # the machine hangs: SSH and all on it gone, EC2 says running
        second = _repaired(home, on_node0, node0, first, resumes=2)
        lab.faults.ec2("RunInstances", "InsufficientInstanceCapacity", times=None, zone=zone)
        lab.interruptions.interrupt(second, notice_s=8.0)
        wait_for(
            lambda: env.run_state(run_id) in ("succeeded", "failed"),
            timeout=400,
            what="the moved run to end",
        )
        status = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    assert attached == lab.hosts.of(node1).address, attached
    events = [f"{e['kind']}: {e['message']}" for e in status["events"]]
    if status["state"] != "succeeded":  # what the nodes said, to see why
        events.append(env.cli("logs", run_id, "--node", "all").stdout[-4000:])
    assert status["state"] == "succeeded", "\n".join(events)
    reasons = [t["reason"] for t in status["transitions"] if t["to"] == "interrupted"]
    assert reasons == [
        f"spot interruption notice on {node1}",
        f"{first} did not answer for 4 s",  # it alone: node 0 was never doomed
        f"spot interruption notice on {second}",
    ], reasons
    assert any(f"no replacement node in {zone} within 3 s" in e for e in events), events

    # node 0; node 1 and two replacements in the same zone; then two nodes elsewhere
    items = {i["InstanceId"]: i for i in lab.instances(run_id)}
    assert len(items) == 6
    assert {items[i]["Placement"]["AvailabilityZone"] for i in (first, second)} == {zone}
    requests = [r for r in lab.front.run_requests if r.get("Placement.GroupName")]
    assert [r["MinCount"] for r in requests] == ["2", "1", "1", "2"]  # only the lost node
    groups = [r["Placement.GroupName"] for r in requests]
    assert set(groups[:3]) == {f"spotrun-{run_id}-{zone}"} and groups[3] != groups[0]
    ended = {i.id: i.end_reason for i in _instances(env, run_id)}
    assert ended[first] == "did not answer for 4 s"
    assert ended[node0] == "the cluster moves"
    after = _layout(home)
    assert after is not None and not {node0, node1, first, second} & set(after)
    moved = {items[i]["Placement"]["AvailabilityZone"] for i in after}
    assert len(moved) == 1 and zone not in moved
    assert (on_node0 / "job.log").read_text().count("resumed at epoch") == 2
    assert "resumed at epoch" in (home / "job.log").read_text()
    assert _final(home / "metrics.jsonl") == reference
    assert len(status["instances"]) == 6
    with Ledger(load_settings(env.home)) as ledger:
        billed = {line.instance_id for line in ledger.cost_lines(run_id) if line.instance_id}
    assert billed == set(items)


def _repaired(home: Path, on_node0: Path, node0: str, lost: str, resumes: int) -> str:
    """Wait until `lost` is replaced, node 0 kept, and the job has resumed (for the
    `resumes`-th time) and trained an epoch; returns the replacement's id."""
    layout = wait_for(
        lambda: (found := _layout(home)) and lost not in found and found,
        timeout=240,
        what=f"{lost} replaced",
    )
    assert layout[0] == node0, layout  # node 0 kept, never relaunched
    log = on_node0 / "job.log"
    wait_for(lambda: _resumes(log) >= resumes, timeout=240, what="the job to resume")
    resumed = _resumed_epoch(log)
    wait_for(
        lambda: _epoch(on_node0 / "metrics.jsonl") > resumed,
        timeout=240,
        what="an epoch on the repaired cluster",
    )
    return str(layout[1])


def _attach_check(env: Env, run_id: str, node: int) -> str:
    """Run `attach --node`'s ssh command with `tmux has-session` in place of the attach (no
    terminal here); returns the address it reached."""
    from spotrun.agent.session import session_name
    from spotrun.service import runs as api

    with Ledger(load_settings(env.home)) as ledger:
        argv = api.attach_command(ledger, run_id, node=node)
    assert argv[-1] == f"tmux attach-session -t ={session_name(run_id)}"
    probe = [a for a in argv[:-1] if a != "-t"] + [f"tmux has-session -t ={session_name(run_id)}"]
    done = subprocess.run(probe, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return argv[-2].split("@", 1)[1]


def _layout(home: Path) -> list[str] | None:
    try:
        return [n["id"] for n in json.loads((home / "cluster.json").read_text())["nodes"]]
    except (OSError, ValueError, KeyError):
        return None


def _epoch(path: Path) -> int:
    try:
        lines = path.read_text().splitlines()
        return int(json.loads(lines[-1]).get("epoch", 0)) if lines else 0
    except (OSError, ValueError):
        return 0


def _resumed(log: Path) -> list[int]:
    try:
        return [int(e) for e in re.findall(r"resumed at epoch (\d+)", log.read_text())]
    except OSError:
        return []


def _resumes(log: Path) -> int:
    return len(_resumed(log))


def _resumed_epoch(log: Path) -> int:
    return _resumed(log)[-1]


def _instances(env: Env, run_id: str) -> list[Any]:
    with Ledger(load_settings(env.home)) as ledger:
        return list(ledger.instances(run_id))


SCRIPT = """\
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(total)
if dist.get_rank() == 0:
    os.makedirs("results", exist_ok=True)
    with open("results/sum.txt", "w") as out:
        node = os.environ["SPOTRUN_NODE_RANK"]
        out.write(f"world {dist.get_world_size()} sum {total.item():g} node {node}")
dist.destroy_process_group()
"""


def test_your_own_command_on_two_nodes_from_a_task_file(env: Env, lab: Lab, tmp_path: Path) -> None:
    """A task file with `nodes: 2`: the command runs on every node with the rendezvous in
    SPOTRUN_TORCHRUN_ARGS; rank 0 (on node 0) writes the output that comes home."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "allreduce.py").write_text(SCRIPT)
    task = tmp_path / "task.yaml"
    task.write_text(
        "name: two-nodes\n"
        "resources: {gpus: 0, nodes: 2}\n"
        "workdir: proj\n"
        'run: "$PY -m torch.distributed.run $SPOTRUN_TORCHRUN_ARGS allreduce.py"\n'
        f"envs: {{PY: {json.dumps(sys.executable)}}}\n"
        "outputs: [results]\n"
    )
    with use_lab(env, lab, **CLUSTER):
        run_id = env.cli("launch", str(task), "--cloud", "aws", "-d", check=True).stdout.strip()
        wait_for(
            lambda: env.run_state(run_id) in ("succeeded", "failed"),
            timeout=240,
            what="the task to end",
        )
        status = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    assert status["state"] == "succeeded", status["events"]
    home = env.home / "runs" / run_id
    assert (home / "workdir" / "results" / "sum.txt").read_text() == "world 2 sum 3 node 0"
    assert len(lab.instances(run_id)) == 2
