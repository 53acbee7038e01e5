"""The IAM policies: every AWS operation spotrun's code makes is allowed by them, and the
JSON of docs/permissions.md is exactly what spotrun.cloud.aws.policy says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import botocore.session

from spotrun.cloud.aws import policy

REPO = Path(__file__).resolve().parents[3]
# Clients spotrun makes, with the prefix IAM gives their actions.
SERVICES = {
    "ec2": "ec2",
    "s3": "s3",
    "ssm": "ssm",
    "pricing": "pricing",
    "service-quotas": "servicequotas",
    "sts": "sts",
}
# boto3 methods that are no API operation, and the actions they take.
TRANSFER = {
    "upload_file": ["s3:PutObject"],
    "upload_fileobj": ["s3:PutObject"],
    "download_file": ["s3:GetObject"],
    "download_fileobj": ["s3:GetObject"],
}
# Operations IAM authorises under another action's name.
IAM_NAME = {
    "s3:HeadBucket": "s3:ListBucket",
    "s3:HeadObject": "s3:GetObject",
    "s3:ListObjectsV2": "s3:ListBucket",
    "s3:DeleteObjects": "s3:DeleteObject",  # checked for each key it names
    "sts:GetCallerIdentity": None,  # needs no permission
}
_CALL = re.compile(r"\.([a-z][a-z0-9_]+)\(")
_PAGINATED = re.compile(r"get_paginator\(\s*\"([a-z0-9_]+)\"")
_WAITER = re.compile(r"get_waiter\(\s*\"([a-z0-9_]+)\"")


def _operations() -> dict[str, list[str]]:
    """boto3 method name -> the IAM actions it may be (one per service that has it)."""
    session = botocore.session.get_session()
    found: dict[str, list[str]] = {}
    for service, prefix in SERVICES.items():
        model = session.get_service_model(service)
        for operation in model.operation_names:
            method = re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower()
            method = re.sub(r"_v_2$", "_v2", method)
            found.setdefault(method, []).append(f"{prefix}:{operation}")
    return found


def _calls_in_code() -> dict[tuple[str, ...], set[str]]:
    """The IAM actions each AWS call in spotrun's code may need (one per service whose client
    has a method of that name) -> the files that make it."""
    operations = _operations()
    needed: dict[tuple[str, ...], set[str]] = {}
    for path in sorted((REPO / "spotrun").rglob("*.py")):
        if "train" in path.relative_to(REPO).parts:
            continue
        text = path.read_text()
        methods = set(_CALL.findall(text)) | set(_PAGINATED.findall(text))
        for waiter in _WAITER.findall(text):  # EC2's waiters poll DescribeInstances
            if waiter.startswith("instance_"):
                methods.add("describe_instances")
        for method in methods:
            candidates = TRANSFER.get(method) or operations.get(method)
            if not candidates:
                continue
            named = tuple(n for a in candidates if (n := IAM_NAME.get(a, a)) is not None)
            if named:
                needed.setdefault(named, set()).add(str(path.relative_to(REPO)))
    return needed


def test_every_aws_call_in_the_code_is_allowed_by_the_policies() -> None:
    allowed = policy.allowed_actions()
    needed = _calls_in_code()
    assert ("ec2:RunInstances",) in needed and ("s3:PutObject",) in needed  # the scan works
    missing = {
        actions: sorted(files)
        for actions, files in needed.items()
        if not any(action in allowed for action in actions)
    }
    assert not missing, f"called by spotrun but allowed by no policy: {missing}"


def _readme_policies() -> list[dict[str, object]]:
    text = (REPO / "docs" / "permissions.md").read_text()
    section = text.split("## Permissions", 1)[1]
    blocks = re.findall(r"```json\n(.*?)```", section, flags=re.S)
    return [json.loads(block) for block in blocks[:3]]


def test_readme_policies_are_the_ones_in_code() -> None:
    user, instance, controller = _readme_policies()
    assert user == policy.user_policy()
    assert instance == policy.instance_policy()
    assert controller == policy.controller_stop_policy()
