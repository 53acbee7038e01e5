"""Spot fault scenarios in the lab, shared by tests/e2e/test_spot_recovery.py (which asserts
on them) and bench/interruption_recovery.py (which prints their matrix and timings).

A scenario launches digits-fast on the lab's EC2 with the real CLI, injects its faults while the
run goes on (spot notices through the host's IMDS, reclaims, damaged checkpoints, EC2 errors,
dropped SSH connections, supervisors killed), waits for the end and measures the outcome.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from spotlab.harness import wait_for
from spotlab.probes import (
    checkpointed_steps,
    lost_steps,
    private_key_modes,
    resumed_steps,
    steps_per_epoch,
)
from spotlab.scenario import (
    COMPARED,
    END_GRACE_S,
    EPOCHS,
    FAST,
    LONG_SSH_TIMEOUT,
    NOTICE_S,
    OVERRIDES,
    Outcome,
    Scenario,
    final_metrics,
    reference_metrics,
)
from spotrun.drive.supervisor import is_supervised

# what tests and benches take from here, beside the scenarios
__all__ = [
    "COMPARED",
    "END_GRACE_S",
    "EPOCHS",
    "FAST",
    "LONG_SSH_TIMEOUT",
    "NOTICE_S",
    "OVERRIDES",
    "SCENARIOS",
    "Outcome",
    "Scenario",
    "checkpointed_steps",
    "final_metrics",
    "lost_steps",
    "private_key_modes",
    "reference_metrics",
    "resumed_steps",
    "secrets_found",
    "steps_per_epoch",
]


def secrets_found(s: Scenario, secrets: list[str]) -> list[str]:
    """Where any of `secrets` was written: the files of SPOTRUN_HOME (the ledger, run folder,
    metrics, supervisor logs, keys) and of every instance of the run (home and /tmp)."""
    roots = [s.env.home]
    for item in s.lab.instances(s.run_id):
        try:
            host = s.lab.hosts.of(item["InstanceId"])
        except KeyError:
            continue
        roots += [host.home, host.tmp]
    needles = [x.encode() for x in secrets if x]
    found = []
    for root in roots:
        for path in root.rglob("*"):
            try:
                if path.is_symlink() or not path.is_file() or path.stat().st_size > 64 * 2**20:
                    continue
                data = path.read_bytes()
            except OSError:  # gone meanwhile (a lock, a temporary file)
                continue
            found += [f"{path}: {n.decode()[:12]}..." for n in needles if n in data]
    return found


# ------------------------------------------------------------------ scenarios
def notice_at_two_points(s: Scenario) -> None:
    """A spot notice early in training, and another on the replacement once it has trained an
    epoch of its own."""
    s.launch()
    first = s.live_instance()
    s.wait_host_epoch(first, 1)
    s.notice(first)
    second = s.wait_running_on_new(first)
    s.wait_host_epoch(second, s.wait_host_resumed(second))
    s.notice(second)
    s.wait_running_on_new(second)


def rebalance_then_stop_and_hibernate(s: Scenario) -> None:
    """A rebalance recommendation (recorded; the run goes on where it is), then notices at two
    points of training whose instances EC2 stops and then hibernates (what it does for a
    request asking that; hibernation begins with the notice, stop two minutes after it): each
    is terminated by spotrun, and the run resumes on new capacity, after the stop from the
    notice's checkpoint. The second replacement first meets no capacity for the same offer and
    EC2 throttling on the way."""
    s.launch()
    first = s.live_instance()
    s.wait_host_epoch(first, 1)
    s.lab.interruptions.rebalance(first)
    s._wait(
        lambda: any("recommends rebalancing" in e for e in s.events()), 120, "the rebalance event"
    )
    s.stop_before_replacing(first, "stop")
    second = s.wait_running_on_new(first)
    s.wait_terminated_mid_run(first)
    s.wait_host_epoch(second, s.wait_host_resumed(second))
    s.lab.faults.ec2("RunInstances", "InsufficientInstanceCapacity", times=1)
    s.lab.faults.ec2("DescribeInstances", "RequestLimitExceeded", times=2)
    s.stop_before_replacing(second, "hibernate")
    s.wait_running_on_new(second)
    s.wait_terminated_mid_run(second)


def reclaim_without_notice(s: Scenario) -> None:
    """EC2 takes the instance back with no notice (the host dies mid-epoch), once a
    checkpoint has left it (synced here or stored in S3)."""
    s.launch()
    old = s.live_instance()
    s.wait_epoch(2)
    s._wait(s.newest_stored_step, 120, "a checkpoint off the instance")
    s.reclaim(old)
    s.wait_running_on_new(old)


def newest_checkpoint_damaged(s: Scenario) -> None:
    """Reclaimed with no notice, and the newest checkpoint held here is torn: the run resumes
    from the one before it."""
    s.launch()
    old = s.live_instance()
    s.wait_epoch(2)
    wait_for(
        lambda: len(list((s.run_dir / "checkpoints").glob("ckpt-*.pt"))) >= 2,
        60,
        "two checkpoints synced here",
    )
    s.reclaim(old)
    s.damage_newest_checkpoint()
    s.wait_running_on_new(old)


def capacity_error_and_throttling(s: Scenario) -> None:
    """A notice; the replacement's first offer has no capacity and EC2 throttles on the way."""
    s.launch()
    old = s.live_instance()
    s.wait_epoch(1)
    s.lab.faults.ec2("RunInstances", "InsufficientInstanceCapacity", times=1)
    s.lab.faults.ec2("DescribeInstances", "RequestLimitExceeded", times=2)
    s.notice(old)
    s.wait_running_on_new(old)


def notice_while_provisioning(s: Scenario) -> None:
    """The notice comes while the instance is still being provisioned (before any job)."""
    s.launch()
    first = s.live_instance()
    s.notice(first, notice_s=0.5)
    s.wait_running_on_new(first)


def ssh_dropped_while_syncing(s: Scenario) -> None:
    """Every SSH connection to the instance is cut, six times, while the run syncs: each time
    once spotrun has connected again. Cuts, not silence: the instance answers every new
    connection, so it is not taken for unreachable (aws.unreachable_s at its default here;
    cut on every connection for that long, it would be replaced)."""
    s.lab.config.write_config(s.env.home, **{**FAST, "unreachable_s": 60.0})
    s.launch()
    inst = s.live_instance()
    s.wait_epoch(1)
    dropped: set[int] = set()

    def connected_again() -> bool:
        # a connection spotrun made and uses, not one still in its handshake (cutting those
        # again and again is an instance that does not answer, which is replaced)
        new = set(s.ssh_connections(inst, established=True)) - dropped
        return bool(new) or s.state() != "running"

    for n in range(6):
        s._wait(connected_again, 120, f"spotrun to connect again ({n} dropped)")
        if s.state() != "running":
            break  # training ended first (a fast machine): the final sync met the drops
        connections = s.ssh_connections(inst)
        dropped.update(connections)
        s.drop_ssh(inst)
        s.drops += 1
        s._act(f"dropped {len(connections)} SSH connection(s)")


def supervisor_killed(s: Scenario, seed: int = 7) -> None:
    """SIGKILL the supervisor at 10 seeded random moments: 4 while launching, 3 while
    recovering from a notice that comes in the first instance's training (always: it is sent
    once the instance has evaluated an epoch, and the job needs several more), 3 while the
    replacement trains; after each, what any spotrun command does first: notice the dead
    supervisor and start another."""
    rng = random.Random(seed)

    def kill_and_reconcile(times: int) -> None:
        for _ in range(times):
            time.sleep(rng.uniform(0.1, 1.5))  # a random moment to kill at (the fault itself)
            s.kill_supervisor()
            s.reconcile()

    s.launch()
    kill_and_reconcile(4)
    old = s.live_instance()
    s.wait_host_epoch(old, 1)
    s.notice(old)
    kill_and_reconcile(3)
    s.wait_running_on_new(old)
    kill_and_reconcile(3)


def _stored(s: Scenario, key: str) -> dict[str, Any] | None:
    """A JSON file the run's agent stored in the lab's S3 (runs/RUN/KEY), if there."""
    try:
        body = s.lab.s3.get_object(Bucket=s.lab.bucket, Key=f"runs/{s.run_id}/{key}")["Body"]
    except s.lab.s3.exceptions.NoSuchKey:
        return None
    return dict(json.loads(body.read()))


def controller_away(s: Scenario) -> None:
    """No controller while the job trains, is interrupted and ends: the supervisor is killed and
    nothing restarts it (the laptop closed) while the job goes on for epochs, a spot notice
    comes and EC2 takes the instance (the agent stores the notice's checkpoint in S3); a
    command then starts a supervisor, which replaces the instance and resumes from S3. It is
    killed again once the job runs there: the job ends with nobody collecting it, and the
    instance's agent terminates the instance after aws.end_grace_s; the next command's
    supervisor finds the agent's record in S3 and finishes the run from what is stored."""
    # The grace after the job's end, scaled down (default 300 s); the rest as every scenario.
    s.lab.config.write_config(s.env.home, **{**FAST, "end_grace_s": END_GRACE_S})
    s.launch()
    first = s.live_instance()
    s.wait_host_epoch(first, 1)
    s.kill_supervisor()
    s.wait_host_epoch(first, 3)  # trains on with no controller anywhere
    s.notice(first)
    s._wait(
        lambda: not s.lab.instances(s.run_id, states=("pending", "running")),
        120,
        f"EC2 to reclaim {first} while no controller runs",
    )
    stored = _stored(s, f"instances/{first}/notice.json")
    if not stored or not stored.get("checkpointed") or stored.get("stored_at") is None:
        raise AssertionError(f"the agent stored no checkpointed notice: {stored}")
    with s.ledger() as ledger:
        if is_supervised(ledger.get_run(s.run_id)):
            raise AssertionError("a supervisor came back before any command ran")
    s._act("reclaimed while away; the notice's checkpoint is in S3")
    s.reconcile()  # a command: the supervisor comes back and picks the run up
    second = s.wait_running_on_new(first)
    s.wait_host_resumed(second)
    s.kill_supervisor()  # away again, until after the job's end
    s._wait(
        lambda: _stored(s, f"instances/{second}/self-terminated.json"),
        240,
        f"the agent of {second} to end it after the job ended",
    )
    s._wait(
        lambda: not s.lab.instances(s.run_id, states=("pending", "running")),
        60,
        f"{second} terminated by its agent",
    )
    s._act("the agent ended the instance while away")
    s.reconcile()


def notice_while_booting(s: Scenario) -> None:
    """The notice comes while the instance boots: EC2 says running, its SSH does not answer
    yet (no agent is there to see the notice), and EC2 takes it back."""
    s.lab.config.write_config(s.env.home, **{**FAST, **LONG_SSH_TIMEOUT})
    usual, s.lab.hosts.boot_s = s.lab.hosts.boot_s, 6.0  # from "running" in EC2 to SSH answering
    s.launch()
    first = s.live_instance()
    s._wait(lambda: s.state() == "provisioning", 60, "spotrun waiting for SSH")
    if first in s.lab.hosts:
        raise AssertionError(f"{first} booted before its notice")
    s.notice(first, notice_s=0.5)
    # spotrun may have its replacement running before EC2 has ended the first: wait on the first
    s._wait(lambda: s.ec2_state(first) != "running", 60, f"{first} reclaimed")
    s.lab.hosts.boot_s = usual  # the replacement boots as the lab's instances do
    s.wait_running_on_new(first)


def notice_while_request_open(s: Scenario) -> None:
    """The notice comes while spotrun's RunInstances call is open: EC2 has made the instance,
    spotrun has not heard of it yet, and EC2 takes it back before the answer arrives."""
    s.lab.config.write_config(s.env.home, **{**FAST, **LONG_SSH_TIMEOUT})
    held = s.lab.faults.hold("RunInstances", forwarded=True)
    s.launch()
    s._wait(partial(held.wait_arrived, 0.1), 120, "spotrun's RunInstances call")
    (first,) = s._wait(
        lambda: [i["InstanceId"] for i in s.lab.instances(s.run_id)], 60, "EC2 to make it"
    )
    s.lab.hosts.wait_for(first, 60)
    s.notice(first, notice_s=0.5)
    s._wait(lambda: s.lab.instances(s.run_id, states=("terminated",)), 60, f"{first} reclaimed")
    held.release()
    s.wait_running_on_new(first)


def notice_while_syncing(s: Scenario) -> None:
    """The job has ended and the run is syncing its results when the notice comes: EC2 takes
    the instance back before the final pull reaches it (that pull fails; the durable store
    has what the agent uploaded)."""
    s.launch()
    inst = s.live_instance()
    s.wait_host_epoch(inst, EPOCHS - 1)
    # The final sync begins by asking EC2 for the run's live instances: EC2 answers "running"
    # and the answer is held while the notice comes and the instance is reclaimed.
    held = s.lab.faults.hold("DescribeInstances", forwarded=True)
    while True:
        s._wait(partial(held.wait_arrived, 0.1), 120, "a DescribeInstances call")
        if s.state() == "syncing":
            break
        earlier, held = held, s.lab.faults.hold("DescribeInstances", forwarded=True)
        earlier.release()  # a call made while still running: let it go, hold the next
    s.notice(inst, notice_s=0.2)
    s._wait(lambda: not s.lab.instances(s.run_id, states=("running",)), 60, f"{inst} reclaimed")
    held.release()


def notice_while_terminating(s: Scenario) -> None:
    """The job has ended and the run is tearing down: the notice comes while spotrun's
    TerminateInstances call is on its way, and EC2 takes the instance back first."""
    s.launch()
    inst = s.live_instance()
    held = s.lab.faults.hold("TerminateInstances")
    s._wait(partial(held.wait_arrived, 0.1), 240, "the run's TerminateInstances call")
    s.notice(inst, notice_s=0.2)
    s._wait(lambda: not s.lab.instances(s.run_id, states=("running",)), 60, f"{inst} reclaimed")
    held.release()


SCENARIOS: dict[str, Callable[[Scenario], None]] = {
    "rebalance; 2 notices that stop, hibernate; capacity error + throttling on 2nd": (
        rebalance_then_stop_and_hibernate
    ),
    "notice at two points of training": notice_at_two_points,
    "reclaimed without notice": reclaim_without_notice,
    "newest checkpoint damaged": newest_checkpoint_damaged,
    "capacity error + throttling on replacement": capacity_error_and_throttling,
    "notice while booting": notice_while_booting,
    "notice while provisioning": notice_while_provisioning,
    "notice while the request is open": notice_while_request_open,
    "notice while syncing": notice_while_syncing,
    "notice while terminating": notice_while_terminating,
    "SSH dropped while syncing": ssh_dropped_while_syncing,
    "supervisor SIGKILLed at 10 random points": supervisor_killed,
    "no controller through a notice and the job's end": controller_away,
}
