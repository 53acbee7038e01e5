"""`spotrun doctor` in the lab, IAM enforced: all green as the README's user, and a user
lacking each permission in turn sees the check that needs it fail, naming what to grant."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from spotlab import Lab
from spotlab.iam import Identity
from tests.conftest import Env

# permission taken away -> the check that must then fail
LACKING = [
    ("ec2:DescribeRegions", "region"),
    ("ssm:GetParameter", "image"),
    ("ec2:DescribeSubnets", "network"),
    ("ec2:DescribeSpotPriceHistory", "spot offers"),
    ("ec2:RunInstances", "launch permissions"),
    ("iam:PassRole", "launch permissions"),
    ("s3:ListBucket", "bucket"),
]


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
    code, checks = _doctor(aws_env)
    assert code == 0, checks
    assert checks["credentials"]["detail"].endswith("user/spotrun-lab-user")
    assert checks["launch permissions"]["status"] == "ok"
    assert "RunInstances" in checks["launch permissions"]["detail"]
    assert checks["bucket"]["status"] == "ok" and checks["instance profile"]["status"] == "ok"
    assert lab.instances() == []  # DryRun made nothing
    human = aws_env.cli("doctor", timeout=180)
    assert human.returncode == 0 and "ready for a first AWS launch" in human.stdout


def test_doctor_without_profile_or_bucket_warns(aws_env: Env, lab: Lab) -> None:
    lab.write_config(aws_env.home, instance_profile=None, bucket=None)
    code, checks = _doctor(aws_env)
    assert code == 0
    assert checks["instance profile"]["status"] == "warn"
    assert "aws.instance_profile" in checks["instance profile"]["fix"]
    assert checks["bucket"]["status"] == "warn"


@pytest.mark.parametrize(("action", "check"), LACKING, ids=[a for a, _ in LACKING])
def test_doctor_names_a_missing_permission(aws_env: Env, lab: Lab, action: str, check: str) -> None:
    key = "AKIADOCTOR" + format(LACKING.index((action, check)), "010d")
    lab.front.iam.add(
        key,
        Identity("arn:aws:iam::123456789012:user/lacking", (_without(lab.user_policy, action),)),
    )
    aws_env.vars["AWS_ACCESS_KEY_ID"] = key
    code, checks = _doctor(aws_env)
    assert code == 1
    failed = checks[check]
    assert failed["status"] == "fail", checks
    assert action.split(":")[1] in failed["detail"] + failed["fix"], failed
    assert [c["name"] for c in checks.values() if c["status"] == "fail"] == [check]
    assert lab.front.iam.denied and all(action in d for d in lab.front.iam.denied)
    lab.front.iam.denied.clear()
