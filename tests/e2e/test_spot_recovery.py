"""Fault injection in the lab (scenarios in spotlab/spot.py; the bench prints them all).

Each scenario asserts what the issue asks: the run completes; its final metrics equal an
uninterrupted run's bit for bit (digits-fast on the CPU is deterministic); the work lost is
zero with a notice and at most one checkpoint interval without (two when the newest checkpoint
is damaged); no spotrun-tagged instance is left running; every instance is in the ledger and
in the run's cost. The notice comes at several points: while the request is open, while
booting, in training, while syncing, while terminating. The lab's credentials are distinctive:
every scenario checks that none was written anywhere, one that none reaches an instance.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spotlab import Lab
from spotlab import spot as spotlab
from spotlab.fixtures import use_lab
from spotlab.imds import ROLE_CREDENTIALS
from spotlab.lab import FAKE_CREDENTIALS
from tests.conftest import Env

pytestmark = pytest.mark.slow

EPOCH = spotlab.steps_per_epoch()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uninterrupted run's metrics, trained once for the whole session: pytest-xdist's
    workers share the folder above their own temporary folders, and the first to get the
    lock trains it while the others wait for its answer."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # .../pytest-N/popen-gwK: pytest-N is this run's
        shared = shared.parent
    with open(shared / "spot-reference.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        answer = shared / "spot-reference.json"
        if answer.exists():
            return dict(json.loads(answer.read_text()))
        metrics = spotlab.reference_metrics(Path(tmp_path_factory.mktemp("reference")))
        answer.write_text(json.dumps(metrics))
        return metrics


@pytest.fixture
def spot_env(env: Env, lab: Lab) -> Iterator[Env]:
    with use_lab(env, lab, **spotlab.FAST):
        yield env


SECRETS = [*FAKE_CREDENTIALS.values(), *ROLE_CREDENTIALS.values()]
SECRET_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def _scenario(
    name: str, env: Env, lab: Lab, reference: dict[str, Any]
) -> tuple[spotlab.Scenario, spotlab.Outcome]:
    scenario = spotlab.Scenario(name, env, lab)
    spotlab.SCENARIOS[name](scenario)
    out = scenario.finish(reference)
    assert out.ok, str(out)
    # Whatever the fault, the user's and the instance role's credentials are written nowhere:
    # the ledger, the run folder, metrics, supervisor logs, every instance's files.
    assert spotlab.secrets_found(scenario, SECRETS) == []
    return scenario, out


def _run(name: str, env: Env, lab: Lab, reference: dict[str, Any]) -> spotlab.Outcome:
    return _scenario(name, env, lab, reference)[1]


def test_rebalance_then_notices_that_stop_and_hibernate(
    spot_env: Env, lab: Lab, reference: dict[str, Any]
) -> None:
    """A rebalance recommendation is recorded and the run stays where it is; then notices at
    two points of training, after which EC2 stops (two minutes later), then hibernates (at
    once: EC2 gives hibernation no two minutes), the instance: spotrun terminates each
    (stopped, its volumes bill) while the run goes on, and resumes, after the stop from the
    notice's checkpoint, after the hibernation from the newest one stored. The second
    replacement first meets no capacity for the same offer (then takes the next one) and EC2
    throttling on the way. No secret is written anywhere, and no AWS credentials reach the
    instances."""
    name = "rebalance; 2 notices that stop, hibernate; capacity error + throttling on 2nd"
    scenario, out = _scenario(name, spot_env, lab, reference)
    assert out.instances == 3, str(out)
    ended = scenario.ended_mid_run  # the stopped ones, terminated by spotrun mid-run
    assert len(set(ended)) == 2, scenario.acts
    (third,) = {i["InstanceId"] for i in lab.instances(scenario.run_id)} - set(ended)
    # Read on the instances themselves: a hibernated one ends before its last lines sync.
    logs = [scenario.host_job_log(i) for i in (*ended, third)]
    # The stop: two minutes' notice, so the job checkpointed and the next one went on there.
    (at_notice,) = spotlab.checkpointed_steps(logs[0])
    assert spotlab.resumed_steps(logs[1]) == [at_notice], logs[1]
    # The hibernation: no time to checkpoint; it went on from the newest checkpoint stored
    # (here or in S3) when EC2 acted, or a newer one.
    resumed = spotlab.resumed_steps(logs[2])[-1]  # its own (the log it was given comes first)
    assert resumed >= scenario.stored_at_fault[1] >= at_notice, (resumed, scenario.acts)
    assert sum("recommends rebalancing" in e for e in out.events) == 1, out.events
    stopped = [e for e in out.events if "volumes bill until" in e]
    assert len(stopped) == 2 and all(i in e for i, e in zip(ended, stopped)), out.events
    with scenario.ledger() as ledger:
        records = {r.id: r for r in ledger.instances(scenario.run_id)}
        for instance_id in ended:  # its end is EC2's stop: compute billed up to it
            assert "Server.SpotInstanceShutdown" in str(records[instance_id].end_reason)
    # The stop's replacement was asked for on the notice, not on the loss that followed it.
    noticed = [e for e in out.events if "requesting a replacement now" in e]
    assert len(out.to_request_s) == 2 and ended[0] in noticed[0], str(out)
    assert any("InsufficientInstanceCapacity" in e for e in out.events), str(out)
    # The replacements fetched the newest stored checkpoint from S3 themselves.
    restored = [e for e in out.events if e.startswith("resume: restored")]
    assert len(restored) == 2 and all("from the durable store" in e for e in restored), restored

    # Security (secrets written nowhere: checked by _scenario for every scenario): no AWS
    # credentials reach an instance: no ~/.aws, none in any process's environment there, the
    # job's included (taken while it trained on the first two instances) ...
    assert len(scenario.host_environments) == 2, scenario.host_environments.keys()
    for instance_id, environments in scenario.host_environments.items():
        assert not lab.hosts.of(instance_id).path("/root/.aws").exists()
        job = [e for e in environments if e.get("SPOTRUN_RUN_ID") == scenario.run_id]
        assert job, f"the job's environment on {instance_id} was not seen"
        for variables in environments:
            assert not set(SECRET_VARIABLES) & set(variables), (instance_id, variables.keys())
            assert not any(x in v for v in variables.values() for x in SECRETS), instance_id
    # ... and the run's private key can be read by its owner only.
    modes = spotlab.private_key_modes(spot_env.home)
    assert modes and all(mode == 0o600 for mode in modes.values()), modes


def test_newest_checkpoint_damaged_after_a_reclaim(
    spot_env: Env, lab: Lab, reference: dict[str, Any]
) -> None:
    out = _run("newest checkpoint damaged", spot_env, lab, reference)
    assert out.instances == 2, str(out)
    (lost,) = out.lost_steps
    assert 0 < lost <= 2 * EPOCH, str(out)  # resumed from the checkpoint before the torn one
    assert any("incomplete" in e or "restored" in e for e in out.events), out.events


def test_reclaimed_without_notice(spot_env: Env, lab: Lab, reference: dict[str, Any]) -> None:
    """EC2 takes the instance back mid-training with no notice (its host dies mid-epoch): the
    run resumes on new capacity from the newest checkpoint that left the instance before
    (synced here or stored in S3), or a newer one. What the instance trained after that dies
    with it: how much depends on how far the copies lag the trainer, which load changes."""
    scenario, out = _scenario("reclaimed without notice", spot_env, lab, reference)
    assert out.instances == 2 and len(out.to_request_s) == 1, str(out)
    (resumed,) = spotlab.resumed_steps(out.log)
    (stored,) = scenario.stored_at_fault
    assert stored > 0 and resumed >= stored, (stored, str(out))


def test_notice_while_provisioning(spot_env: Env, lab: Lab, reference: dict[str, Any]) -> None:
    """The notice comes before any job ran on the instance: the replacement trains it all."""
    out = _run("notice while provisioning", spot_env, lab, reference)
    assert out.instances == 2 and out.lost_steps == [], str(out)
    assert len(out.to_request_s) == 1, str(out)


def test_ssh_dropped_while_syncing(spot_env: Env, lab: Lab, reference: dict[str, Any]) -> None:
    """Every SSH connection is cut, again each time spotrun has connected anew: the run syncs
    on over new connections, on the same instance, and ends whole."""
    scenario, out = _scenario("SSH dropped while syncing", spot_env, lab, reference)
    assert scenario.drops >= 1, scenario.acts
    assert out.instances == 1 and out.to_request_s == [] and out.lost_steps == [], str(out)


def test_supervisor_killed_at_ten_random_points(
    spot_env: Env, lab: Lab, reference: dict[str, Any]
) -> None:
    out = _run("supervisor SIGKILLed at 10 random points", spot_env, lab, reference)
    assert any("supervisor was not running" in e for e in out.events), out.events
    assert out.instances == 2 and out.lost_steps == [0], str(out)  # the notice's recovery


def test_notice_while_the_request_is_open(
    spot_env: Env, lab: Lab, reference: dict[str, Any]
) -> None:
    """EC2 made the instance and took it back while spotrun's RunInstances call was still
    open: the run asks again and trains on the second instance; both are in the ledger. (With
    aws.ssh_timeout_s longer than the scenario's waits: waiting for SSH of the gone instance
    instead of asking EC2 fails it.)"""
    out = _run("notice while the request is open", spot_env, lab, reference)
    assert out.instances == 2 and out.lost_steps == [], str(out)
    assert len(out.to_request_s) == 1, str(out)


def test_notice_while_booting(spot_env: Env, lab: Lab, reference: dict[str, Any]) -> None:
    """EC2 took the instance back before its SSH answered: the replacement is asked for while
    spotrun waits for SSH (it asks EC2 meanwhile), not after aws.ssh_timeout_s (600 s here,
    longer than the scenario waits for the replacement)."""
    out = _run("notice while booting", spot_env, lab, reference)
    assert out.instances == 2 and out.lost_steps == [], str(out)
    assert len(out.to_request_s) == 1, str(out)


def test_notice_while_syncing(spot_env: Env, lab: Lab, reference: dict[str, Any]) -> None:
    """The job ended; the notice came and EC2 took the instance during the final sync: the
    results are whole (synced before, and the durable store), and nothing is replaced."""
    scenario, out = _scenario("notice while syncing", spot_env, lab, reference)
    assert scenario.states_at_fault == ["syncing"], scenario.acts
    assert out.instances == 1 and out.to_request_s == [] and out.lost_steps == [], str(out)


def test_notice_while_terminating(spot_env: Env, lab: Lab, reference: dict[str, Any]) -> None:
    """The notice came while the run's own TerminateInstances was on its way: no
    replacement, the instance's end and cost recorded once."""
    scenario, out = _scenario("notice while terminating", spot_env, lab, reference)
    assert scenario.states_at_fault == ["syncing"], scenario.acts  # teardown ends the syncing
    assert out.instances == 1 and out.to_request_s == [] and out.lost_steps == [], str(out)


def test_no_controller_through_a_notice_and_the_jobs_end(
    spot_env: Env, lab: Lab, reference: dict[str, Any]
) -> None:
    """The laptop closes twice: the job trains on with no controller, is interrupted and its
    checkpoint stored; the returning supervisor replaces the instance and resumes from S3;
    away again, the job ends and its agent terminates the instance after the grace; the
    returning supervisor finishes the run from the stored files: same metrics, all billed."""
    scenario, out = _scenario(
        "no controller through a notice and the job's end", spot_env, lab, reference
    )
    assert out.instances == 2 and out.lost_steps == [0], str(out)
    assert out.restored_from == ["s3"], str(out)
    ended = [e for e in out.events if e.startswith("agent: the agent of")]
    assert len(ended) == 1 and "the job ended" in ended[0], out.events
    # The last metrics came from the store (out.ok checked they are whole, each epoch once):
    # adopted from the agent's record, or pulled before it as the stored copy reached further.
    last_return = max(i for i, e in enumerate(out.events) if "supervisor was not running" in e)
    pulled = any("from the durable store" in e for e in out.events[last_return:])
    assert "metrics.jsonl" in ended[0] or pulled, out.events
    assert sum("supervisor was not running" in e for e in out.events) == 2, out.events
