"""The account's vCPU quotas, as EC2 enforces them (issue 32, item 1): the lab's RunInstances
refuses what passes a quota (MaxSpotInstanceCountExceeded for spot, VcpuLimitExceeded for
on-demand); a new account's GPU launch fails naming the quota and the exact request that
raises it; readable quotas leave over-quota offers out of the plan, with a line."""

from __future__ import annotations

import time
from collections.abc import Callable

import boto3
import pytest
from botocore.exceptions import ClientError

from spotlab import Lab
from spotlab.regions import REGION
from tests.conftest import Env
from tests.e2e.test_aws_errors import _nothing_left
from tests.e2e.test_bad_input import assert_one_line_error

G_SPOT, G_ON_DEMAND, P_SPOT = "L-3819A6DF", "L-DB2E81BA", "L-7212CCBC"


def _increase(code: str, vcpus: int) -> str:
    return (
        f"aws service-quotas request-service-quota-increase --service-code ec2 "
        f"--quota-code {code} --desired-value {vcpus} --region {REGION}"
    )


def test_the_labs_run_instances_enforces_the_vcpu_quotas(make_lab: Callable[..., Lab]) -> None:
    """G and VT spot quota of 4 vCPUs: one g4dn.xlarge (4) fits, a g5.xlarge beside it is
    refused with MaxSpotInstanceCountExceeded, a standard spot type is another quota; an
    on-demand G type meets its own quota (0) with VcpuLimitExceeded; once the g4dn.xlarge has
    ended, the g5.xlarge fits. Nothing is made by a refused call."""
    lab = make_lab(iam=False, bucket=False)
    lab.capacity.set_vcpu_quota(G_SPOT, 4, readable=False)
    lab.capacity.set_vcpu_quota(G_ON_DEMAND, 0, readable=False)
    assert lab.network is not None
    with lab.config.environ():
        ec2 = boto3.client("ec2", region_name=REGION)
    subnet = lab.network.subnets["us-east-1a"]
    made: list[str] = []

    def run(instance_type: str, spot: bool = True) -> None:
        market = {"InstanceMarketOptions": {"MarketType": "spot"}} if spot else {}
        answer = ec2.run_instances(
            ImageId=lab.image_id,
            InstanceType=instance_type,
            MinCount=1,
            MaxCount=1,
            SubnetId=subnet,
            **market,
        )
        made.extend(i["InstanceId"] for i in answer["Instances"])

    try:
        run("g4dn.xlarge")
        with pytest.raises(ClientError) as spot_refused:
            run("g5.xlarge")
        error = spot_refused.value.response["Error"]
        assert (error["Code"], error["Message"]) == (
            "MaxSpotInstanceCountExceeded",
            "Max spot instance count exceeded",
        )
        run("c6i.large")  # All Standard spot: no limit set here
        with pytest.raises(ClientError) as on_demand_refused:
            run("g4dn.xlarge", spot=False)
        error = on_demand_refused.value.response["Error"]
        assert error["Code"] == "VcpuLimitExceeded"
        assert "current vCPU limit of 0 allows" in error["Message"]
        assert len(made) == 2 and len(lab.instances(states=("pending", "running"))) == 2
        lab.client("ec2").terminate_instances(InstanceIds=[made[0]])
        run("g5.xlarge")  # the ended instance's vCPUs are free again
    finally:
        if made:
            lab.client("ec2").terminate_instances(InstanceIds=made)
    assert lab.capacity.vcpu_quotas.refused == [("g5.xlarge", G_SPOT), ("g4dn.xlarge", G_ON_DEMAND)]


def test_a_new_accounts_gpu_launch_fails_naming_the_quota_and_the_request(
    aws_env: Env, lab: Lab
) -> None:
    """A new account (GPU quotas 0, Service Quotas not readable): every offer of a 1-GPU
    launch is refused by EC2. One request per quota (G and VT, then P4/P3/P2 for a p4d made
    cheap enough to be in the plan), not one per offer; the run fails with one line naming the
    cheapest offer's quota, its code and the exact request for the 4 vCPUs of a g4dn.xlarge,
    and nothing is left running."""
    lab.capacity.new_account()
    lab.prices.set_spot("p4d.24xlarge", "us-east-1a", [(time.time() - 3600, 0.5)])
    proc = aws_env.cli("launch", "digits-fast", "--gpus", "1", "--cloud", "aws")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (run,) = aws_env.runs()
    assert run["state"] == "failed"
    message = run["message"]
    assert message.startswith("MaxSpotInstanceCountExceeded: "), message
    for said in ("'All G and VT Spot Instance Requests' (L-3819A6DF)", _increase(G_SPOT, 4)):
        assert said in message and said in proc.stdout + proc.stderr
    assert "also refused by the quota(s) All P4, P3 and P2 Spot Instance Requests" in message
    assert "no offer could be filled" not in message
    assert lab.capacity.vcpu_quotas.refused == [("g4dn.xlarge", G_SPOT), ("p4d.24xlarge", P_SPOT)]
    _nothing_left(lab, run["id"])


def test_readable_quotas_leave_over_quota_offers_out_of_the_plan(aws_env: Env, lab: Lab) -> None:
    """With GetServiceQuota answering: G and VT spot at 0 leaves every G offer out of a 1-GPU
    plan, with a line naming the quota, and the plan takes the P offer. With every GPU quota
    at 0 nothing is left: one error line with the request to raise the cheapest offer's
    quota, before anything exists. Quotas Service Quotas will not tell are a line, no block."""
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws", "--dry-run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert (
        "vCPU quota 'All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests' "
        "(L-34B43A08) in us-east-1 not known (Service Quotas answered AccessDeniedException): "
        "EC2 decides at the request" in said
    ), said

    lab.capacity.set_vcpu_quota(G_SPOT, 0)
    lab.capacity.set_vcpu_quota(P_SPOT, 640)
    proc = aws_env.cli("launch", "digits-fast", "--gpus", "1", "--cloud", "aws", "--dry-run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert "cheapest of 3 fitting offer(s): p4d.24xlarge" in said, said
    assert (
        "left out 12 offer(s) of g4dn.xlarge, g5.12xlarge, g5.xlarge, g6.xlarge: the vCPU "
        "quota " in said
    )
    assert "'All G and VT Spot Instance Requests' (L-3819A6DF) in us-east-1 is 0 vCPUs" in said

    lab.capacity.new_account(readable=True)
    proc = aws_env.cli("launch", "digits-fast", "--gpus", "1", "--cloud", "aws")
    assert_one_line_error(
        proc, 1, "All G and VT Spot Instance Requests' (L-3819A6DF)", _increase(G_SPOT, 4)
    )
    assert aws_env.runs() == [] and lab.instances() == []
    assert lab.front.run_requests == []
