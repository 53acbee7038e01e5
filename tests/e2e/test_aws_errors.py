"""AWS errors, injected as EC2 itself sends them (error XML, EC2's status codes), parsed and
retried by botocore in whichever spotrun process meets them; hosts that never answer SSH; host
keys that change."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from spotlab import Lab
from spotlab.fixtures import use_lab
from spotrun.cloud.aws import AwsProvider
from spotrun.cloud.base import InstanceRequest
from spotrun.control.controller import RunController
from spotrun.control.recovery import InstanceAccess, Recovery
from spotrun.core.config import Resources, load_settings
from spotrun.core.errors import RemoteError
from spotrun.core.runstates import RunState
from spotrun.service import runs as api
from spotrun.store.ledger import Ledger, RunRecord
from tests.conftest import Env
from tests.e2e.test_bad_input import assert_one_line_error

CAPACITY_CODES = ["InsufficientInstanceCapacity", "SpotMaxPriceTooLow"]


def _request_step(env: Env) -> tuple[Ledger, RunRecord, AwsProvider]:
    """Plan a digits-fast run on the lab and drive only its request step, in this process."""
    settings = load_settings(env.home)
    prepared = api.prepare_launch(settings, "digits-fast", api.LaunchRequest(cloud="aws"))
    ledger = Ledger(settings)
    run = ledger.create_run(prepared.spec, plan=prepared.plan)
    provider = AwsProvider(settings)
    controller = RunController(ledger, run.id, provider=provider)
    return ledger, controller.request(ledger.get_run(run.id)), provider


def _nothing_left(lab: Lab, run_id: str) -> None:
    live = lab.instances(run_id, states=("pending", "running"))
    assert live == []
    run_filter = [{"Name": "tag:spotrun:run-id", "Values": [run_id]}]
    assert lab.ec2.describe_security_groups(Filters=run_filter)["SecurityGroups"] == []
    assert lab.ec2.describe_key_pairs(Filters=run_filter)["KeyPairs"] == []


@pytest.mark.parametrize("code", CAPACITY_CODES)
def test_capacity_error_moves_on_to_the_next_offer(aws_env: Env, lab: Lab, code: str) -> None:
    cheapest = "us-east-1c"  # c6i.large is cheapest there in the lab's default market
    fault = lab.faults.ec2("RunInstances", code, zone=cheapest)
    ledger, run, provider = _request_step(aws_env)
    assert run.state is RunState.PROVISIONING
    assert fault.hits == 1  # not retried by botocore: the next offer is tried at once
    (instance,) = provider.describe(run.id)
    assert (instance.instance_type, instance.zone) == ("c6i.large", "us-east-1a")
    events = [e.message for e in ledger.events(run.id)]
    assert any(e.startswith(f"c6i.large in {cheapest}: {code}") for e in events), events
    provider.terminate(run.id)
    _nothing_left(lab, run.id)


def test_a_spot_pool_that_runs_out_sends_the_next_run_to_the_next_offer(
    aws_env: Env, lab: Lab
) -> None:
    """EC2's spot capacity is per type and zone (the lab's pools, on by default): the cheapest
    offer's pool holds one instance here. The first run takes it; the second is refused there
    with EC2's InsufficientInstanceCapacity, naming type and zone, and gets the next cheapest
    offer; once the first has ended, a third fits there again."""
    cheapest = "us-east-1c"
    lab.capacity.set_spot("c6i.large", cheapest, 1)
    placed = []
    for _ in range(2):
        ledger, run, provider = _request_step(aws_env)
        (instance,) = provider.describe(run.id)
        placed.append((run.id, instance.zone))
    assert [zone for _, zone in placed] == [cheapest, "us-east-1a"]
    events = [e.message for e in ledger.events(placed[1][0])]
    refusal = next(e for e in events if e.startswith(f"c6i.large in {cheapest}: "))
    assert "InsufficientInstanceCapacity" in refusal, refusal
    assert f"c6i.large capacity in the Availability Zone you requested ({cheapest})" in refusal
    assert lab.capacity.spot_pools.refused == [("c6i.large", cheapest)]
    provider.terminate(placed[0][0])
    ledger, run, provider = _request_step(aws_env)
    (instance,) = provider.describe(run.id)
    assert instance.zone == cheapest, "the ended instance's place was not freed"
    for run_id in (placed[1][0], run.id):
        provider.terminate(run_id)
    for run_id in (placed[0][0], placed[1][0], run.id):
        _nothing_left(lab, run_id)


def test_an_instance_stopped_without_a_notice_is_lost_capacity_and_terminated(
    aws_env: Env, lab: Lab
) -> None:
    """Stopped with no spot notice (by hand, or EC2's scheduled retirement): the run has lost
    its capacity (the recovery replaces it as after a reclaim), and the stopped instance,
    whose volumes bill, is terminated when the replacement collects, its compute end kept
    at the stop."""
    ledger, run, provider = _request_step(aws_env)
    (instance,) = provider.describe(run.id)
    lab.ec2.stop_instances(InstanceIds=[instance.id])
    recovery = Recovery(ledger, provider, run.id)
    reason = recovery.describe_loss()
    assert reason is not None and reason.startswith(f"instance {instance.id} was stopped"), reason
    (record,) = ledger.instances(run.id)
    stopped_at = record.terminated_at
    assert stopped_at is not None and "UserInitiatedShutdown" in str(record.end_reason)
    assert lab.instances(run.id, states=("stopped",))  # still there, its volume billing
    access = InstanceAccess(job_ended=lambda i: True, sync=lambda i: None, durable=lambda: None)
    recovery.collect(ledger.get_run(run.id), access)
    assert [i["State"]["Name"] for i in lab.instances(run.id)] == ["terminated"]
    (record,) = ledger.instances(run.id)
    assert record.terminated_at == stopped_at and str(record.end_reason).endswith("; terminated")
    assert any("volumes bill until" in e.message for e in ledger.events(run.id))
    provider.terminate(run.id)
    _nothing_left(lab, run.id)


def test_all_offers_failing_lists_what_was_tried(aws_env: Env, lab: Lab) -> None:
    fault = lab.faults.ec2("RunInstances", "InsufficientInstanceCapacity", times=None)
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (run,) = aws_env.runs()
    assert run["state"] == "failed"
    message = run["message"]
    assert message.startswith("no offer could be filled; tried ")
    for zone in ("us-east-1a", "us-east-1b", "us-east-1c"):
        for instance_type in ("c6i.large", "m6i.large"):
            assert f"{instance_type} in {zone}: InsufficientInstanceCapacity" in message
    assert fault.hits == 6  # each offer once
    _nothing_left(lab, run["id"])


def test_a_spot_quota_too_small_names_the_quota_and_the_request(aws_env: Env, lab: Lab) -> None:
    """The Standard spot quota at 0 vCPUs (Service Quotas not readable): EC2's own answer,
    MaxSpotInstanceCountExceeded, fails the run with the quota, its code and the request that
    raises it to the c6i.large's 2 vCPUs; every offer is under that quota, so it is asked once."""
    lab.capacity.set_vcpu_quota("L-34B43A08", 0, readable=False)
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (run,) = aws_env.runs()
    assert run["state"] == "failed"
    assert run["message"].startswith("MaxSpotInstanceCountExceeded: "), run["message"]
    for name in (
        "'All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests' (L-34B43A08)",
        "--quota-code L-34B43A08 --desired-value 2 --region us-east-1",
    ):
        assert name in run["message"] and name in proc.stdout
    assert lab.capacity.vcpu_quotas.refused == [("c6i.large", "L-34B43A08")]
    _nothing_left(lab, run["id"])


def test_permission_errors_name_what_to_grant(aws_env: Env, lab: Lab) -> None:
    fault = lab.faults.ec2("RunInstances", "UnauthorizedOperation", times=None)
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (run,) = aws_env.runs()
    assert run["state"] == "failed" and run["message"].startswith("UnauthorizedOperation")
    for name in ("ec2:RunInstances", "grant"):
        assert name in run["message"] and name in proc.stdout
    assert fault.hits == 1  # neither retried nor tried elsewhere: another zone cannot help
    _nothing_left(lab, run["id"])


def test_request_limit_exceeded_is_left_to_botocore_retries(aws_env: Env, lab: Lab) -> None:
    fault = lab.faults.ec2("RunInstances", "RequestLimitExceeded", times=2)
    ledger, run, provider = _request_step(aws_env)
    assert run.state is RunState.PROVISIONING
    assert fault.hits == 2 and lab.front.actions.count("RunInstances") == 3
    assert len(provider.describe(run.id)) == 1
    assert not [e for e in ledger.events(run.id) if "RequestLimitExceeded" in e.message]
    provider.terminate(run.id)


def _key_pairs(lab: Lab) -> set[str]:
    return {k["KeyName"] for k in lab.ec2.describe_key_pairs()["KeyPairs"]}


def test_dry_run_checks_permissions_and_launches_nothing(aws_env: Env, lab: Lab) -> None:
    keys_before = _key_pairs(lab)
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert (
        "permitted: RunInstances, CreateSecurityGroup, ImportKeyPair, TerminateInstances"
        in proc.stdout
    )
    assert "nothing was launched" in proc.stdout
    assert aws_env.runs() == [] and lab.instances() == []
    assert _key_pairs(lab) == keys_before
    assert not (aws_env.home / "ssh").exists()  # no key was made either

    lab.faults.ec2("RunInstances", "UnauthorizedOperation")
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws", "--dry-run")
    assert_one_line_error(proc, 1, "UnauthorizedOperation", "ec2:RunInstances")
    assert aws_env.runs() == [] and lab.instances() == []


def test_ssh_never_answering_terminates_the_instance(
    env: Env, make_lab: Callable[..., Lab]
) -> None:
    silent = make_lab(boot="silent", bucket=False)
    with use_lab(env, silent, ssh_timeout_s=3.0):
        proc = env.cli("launch", "digits-fast", "--cloud", "aws")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (run,) = env.runs()
    assert run["state"] == "failed"
    assert "did not answer SSH" in run["message"] and "within 3 s" in run["message"]
    (item,) = silent.instances(run["id"])
    assert item["State"]["Name"] == "terminated"
    assert f"terminated {item['InstanceId']}" in run["message"]
    assert not silent.hosts.of(item["InstanceId"]).alive


def test_a_changed_host_key_is_refused(aws_env: Env, lab: Lab) -> None:
    settings = load_settings(aws_env.home)
    provider = AwsProvider(settings)
    (offer,) = provider.offers(Resources(instance_type="c6i.large", zone="us-east-1a"))
    run_id = "hostkey00001"
    (instance,) = provider.wait_ready(provider.launch(InstanceRequest(run_id, offer)), 20)
    assert provider.runner(instance).run("echo first").stdout == "first\n"  # pinned on first use
    attach = provider.attach_command(run_id)
    user_ssh = [*[a for a in attach[:-1] if a != "-t"], "-o", "BatchMode=yes", "true"]
    assert subprocess.run(user_ssh, capture_output=True, timeout=30).returncode == 0

    lab.hosts.replace_key(instance.id)  # another machine now answers on the instance's address
    fresh = AwsProvider(settings)  # a new process: no connection left over
    with pytest.raises(RemoteError, match="not the key pinned when spotrun first connected"):
        fresh.runner(instance).run("echo second")
    refused = subprocess.run(user_ssh, capture_output=True, text=True, timeout=30)
    assert refused.returncode == 255 and "host key" in refused.stderr.lower()
    provider.terminate(run_id)


def _json(proc: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(proc.stdout)
