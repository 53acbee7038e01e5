"""`spotrun doctor` in the lab, IAM enforced: all green as the README's user, and a user
lacking each permission of the README's user policy in turn sees the check that needs it fail,
naming what to grant; the permissions doctor cannot check before anything exists are listed
with why, and together the two lists are exactly the policy's."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from spotlab import Lab
from spotlab.iam import Identity
from spotlab.lab import DEFAULT_SPOT_PRICES
from spotrun.cloud.aws.policy import user_policy
from spotrun.cloud.aws.quotas import quota_code
from tests.conftest import Env

# permission taken away -> the check that must then fail
LACKING = [
    ("ec2:DescribeRegions", "region"),
    ("ssm:GetParameter", "image"),
    ("ec2:DescribeImages", "image"),
    ("ec2:DescribeSubnets", "network"),
    ("ec2:DescribeInstanceTypes", "spot offers"),
    ("ec2:DescribeSpotPriceHistory", "spot offers"),
    ("ec2:RunInstances", "launch permissions"),
    ("ec2:CreateTags", "launch permissions"),  # RunInstances tags what it makes
    ("iam:PassRole", "launch permissions"),
    ("ec2:ImportKeyPair", "launch permissions"),
    ("ec2:CreateSecurityGroup", "launch permissions"),
    ("ec2:DescribeInstances", "launch permissions"),
    ("ec2:DescribeKeyPairs", "launch permissions"),
    ("ec2:DescribeSecurityGroups", "launch permissions"),
    ("s3:ListBucket", "bucket"),
    ("s3:GetObject", "bucket"),
]
# permission taken away -> the check that then warns (a launch goes on without it)
WARNING = [
    ("servicequotas:GetServiceQuota", "vCPU quota"),  # EC2 decides at launch
]
# What doctor cannot check before anything exists, and why.
NOT_CHECKED = {
    "pricing:GetProducts": "optional: on-demand prices then come from spotrun's shipped table "
    "(the offers line says which)",
    "ec2:AuthorizeSecurityGroupIngress": "acts on the run's own security group, made at launch",
    "ec2:TerminateInstances": "allowed only on instances tagged spotrun:run-id: none exists "
    "yet, and a DryRun on a made-up id is answered NotFound",
    "ec2:DeleteKeyPair": "tag-scoped, on the run's key pair, made at launch",
    "ec2:DeleteSecurityGroup": "tag-scoped, on the run's security group, made at launch",
    "ec2:RevokeSecurityGroupIngress": "tag-scoped, on a reused run's security group",
    "ec2:DeleteVolume": "tag-scoped, on a run's volume (snapshot: data)",
    "ec2:CancelSpotInstanceRequests": "tag-scoped, on a run's spot request",
    "ec2:DeletePlacementGroup": "tag-scoped, on a multi-node run's placement group",
    "ec2:StartInstances": "only the controller instance of `controller up --on aws`",
    "ec2:DescribeSpotInstanceRequests": "gc's look for orphans only",
    "ec2:DescribeVolumes": "snapshot: and cache-volume data only",
    "ec2:DescribeSnapshots": "snapshot: data only, checked when such a launch is planned",
    "ec2:CreateVolume": "snapshot: and cache-volume data only",
    "ec2:AttachVolume": "snapshot: and cache-volume data only",
    "ec2:DetachVolume": "snapshot: and cache-volume data only",
    "ec2:CreatePlacementGroup": "multi-node launches only",
    "ec2:DescribePlacementGroups": "multi-node launches and gc only",
    "s3:PutObject": "doctor writes nothing; `data push` and the instance role store objects",
    "s3:DeleteObject": "doctor deletes nothing; `spotrun rm` deletes a run's stored files",
    "ec2:GetSpotPlacementScores": "optional: without it the plan ranks by price and history",
    "ec2:DescribeAvailabilityZones": "optional: the zone names of placement scores' zone IDs",
}


def _policy_actions() -> set[str]:
    found: set[str] = set()
    for statement in user_policy()["Statement"]:
        actions = statement["Action"]
        found.update([actions] if isinstance(actions, str) else actions)
    return found


def test_every_permission_of_the_user_policy_is_checked_or_said_why_not() -> None:
    checked = [a for a, _ in LACKING + WARNING]
    assert len(set(checked)) == len(checked) and not set(checked) & set(NOT_CHECKED)
    assert set(checked) | set(NOT_CHECKED) == _policy_actions()


def _without(policy: dict[str, Any], action: str) -> dict[str, Any]:
    reduced = copy.deepcopy(policy)
    for statement in reduced["Statement"]:
        actions = statement["Action"]
        actions = [actions] if isinstance(actions, str) else actions
        statement["Action"] = [a for a in actions if a != action] or ["none:Nothing"]
    return reduced


def _doctor(env: Env) -> tuple[int, dict[str, dict[str, str]]]:
    proc = env.cli("doctor", "--json", timeout=180)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, {c["name"]: c for c in json.loads(proc.stdout)}


def test_doctor_passes_as_the_readme_user_and_creates_nothing(aws_env: Env, lab: Lab) -> None:
    _answer_quotas(lab)
    code, checks = _doctor(aws_env)
    assert code == 0, checks
    assert [c for c in checks.values() if c["status"] != "ok"] == [], checks
    assert checks["credentials"]["detail"].endswith("user/spotrun-lab-user")
    assert checks["launch permissions"]["status"] == "ok"
    assert "RunInstances" in checks["launch permissions"]["detail"]
    assert checks["bucket"]["status"] == "ok" and checks["instance profile"]["status"] == "ok"
    assert lab.instances() == []  # DryRun made nothing
    human = aws_env.cli("doctor", timeout=180)
    assert human.returncode == 0 and "ready for a first AWS launch" in human.stdout


def test_doctor_without_profile_or_bucket_warns(aws_env: Env, lab: Lab) -> None:
    lab.config.write_config(aws_env.home, instance_profile=None, bucket=None)
    code, checks = _doctor(aws_env)
    assert code == 0
    assert checks["instance profile"]["status"] == "warn"
    assert "aws.instance_profile" in checks["instance profile"]["fix"]
    assert checks["bucket"]["status"] == "warn"


def _answer_quotas(lab: Lab) -> None:
    """Service Quotas answers the spot vCPU quota of every type the lab's market has."""
    for instance_type in DEFAULT_SPOT_PRICES:
        code = quota_code(instance_type, spot=True)
        if code:
            lab.front.quotas.values[code] = 640.0


def test_doctor_shows_the_vcpu_quotas_per_family_and_region(aws_env: Env, lab: Lab) -> None:
    """Spot G and VT at 0 (the cheapest 1-GPU offer, a g4dn.xlarge, needs 4), P4/P3/P2 spot at
    64, on-demand quotas unreadable: one row per family group on offer, in the region, with
    its spot and on-demand quota and value; the check fails with the exact request."""
    lab.capacity.set_vcpu_quota("L-3819A6DF", 0)
    lab.capacity.set_vcpu_quota("L-7212CCBC", 64)
    code, checks = _doctor(aws_env)
    assert code == 1
    quota = checks["vCPU quota"]
    assert quota["status"] == "fail", quota
    assert "0 spot vCPUs (L-3819A6DF) < 4 that g4dn.xlarge needs" in quota["detail"]
    assert "--quota-code L-3819A6DF --desired-value 4 --region us-east-1" in quota["fix"]
    assert quota["rows"] == [
        "us-east-1 g4dn, g5, g6: spot 'All G and VT Spot Instance Requests' (L-3819A6DF): "
        "0 vCPUs; on-demand 'Running On-Demand G and VT instances' (L-DB2E81BA): not known",
        "us-east-1 p4d: spot 'All P4, P3 and P2 Spot Instance Requests' (L-7212CCBC): "
        "64 vCPUs; on-demand 'Running On-Demand P instances' (L-417A185B): not known",
    ]
    human = aws_env.cli("doctor", timeout=180).stdout
    assert "us-east-1 p4d: spot 'All P4, P3 and P2 Spot Instance Requests'" in human


def _as_user_without(lab: Lab, env: Env, action: str) -> None:
    key = "AKIADOCTOR" + format(sorted(_policy_actions()).index(action), "010d")
    lab.front.iam.add(
        key,
        Identity(
            "arn:aws:iam::123456789012:user/lacking", (_without(lab.iam.user_policy, action),)
        ),
    )
    env.vars["AWS_ACCESS_KEY_ID"] = key


@pytest.mark.parametrize(("action", "check"), LACKING, ids=[a for a, _ in LACKING])
def test_doctor_names_a_missing_permission(aws_env: Env, lab: Lab, action: str, check: str) -> None:
    _as_user_without(lab, aws_env, action)
    code, checks = _doctor(aws_env)
    assert code == 1
    failed = checks[check]
    assert failed["status"] == "fail", checks
    assert action.split(":")[1] in failed["detail"] + failed["fix"], failed
    assert [c["name"] for c in checks.values() if c["status"] == "fail"] == [check]
    assert lab.front.iam.denied and all(action in d for d in lab.front.iam.denied)
    lab.front.iam.denied.clear()


@pytest.mark.parametrize(("action", "check"), WARNING, ids=[a for a, _ in WARNING])
def test_doctor_warns_of_an_optional_permission(
    aws_env: Env, lab: Lab, action: str, check: str
) -> None:
    _answer_quotas(lab)
    _as_user_without(lab, aws_env, action)
    code, checks = _doctor(aws_env)
    assert code == 0 and checks[check]["status"] == "warn", checks
    assert action in checks[check]["fix"], checks[check]
    assert [c["name"] for c in checks.values() if c["status"] != "ok"] == [check]
    assert lab.front.iam.denied and all(action in d for d in lab.front.iam.denied)
    lab.front.iam.denied.clear()
