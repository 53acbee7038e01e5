"""The lab's IAM: the user spotrun acts as and the instance roles, with the README's policies,
and what the front's IAM checks ask of the account (a resource's tags, whether a bucket is).

An instance's IMDS serves its role's session once EC2 says it has a profile; the session's keys
are then known to the front as that role, so an instance can do exactly what its role allows.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from spotlab.front import AwsFront
from spotlab.iam import Identity
from spotlab.imds import ROLE, role_credentials
from spotrun.cloud.aws.policy import controller_stop_policy, instance_policy, user_policy

ACCOUNT = "123456789012"  # moto's
USER = "spotrun-lab-user"  # the IAM user spotrun acts as (its keys: FAKE_CREDENTIALS)
INSTANCE_PROFILE = "spotrun-lab-profile"  # holds ROLE, whose policy is the README's
# `controller up --on aws`'s instance profile: its role holds the README's user policy
CONTROLLER_PROFILE = "spotrun-lab-controller-profile"
CONTROLLER_ROLE = "spotrun-lab-controller-role"
# The user's credentials in the lab: fake (moto takes any) but distinctive, so that a test can
# look for them where they must never be (logs, the ledger, metrics, the instances' files).
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIASPOTRUNLABUSER7Q",
    "AWS_SECRET_ACCESS_KEY": "lab-user-secret-Vq3xK9pLm2ZtR8wNc4HdY6sBf1JgE5uA",
    "AWS_SESSION_TOKEN": "lab-user-session-Tk7Ww2Qe9Rr4Yu1Ii8Oo3Pp6Aa5Ss0Dd",
}
_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}

Client = Callable[..., Any]  # (service, region) -> a boto3 client straight to moto


class LabIam:
    """Identities and sessions; `enabled`: the front enforces IAM (spotlab/iam.py)."""

    def __init__(
        self,
        front: AwsFront,
        client: Client,
        region_of: Callable[[str], str],
        bucket: str,
        *,
        enabled: bool,
    ) -> None:
        self.front = front
        self.client = client
        self.region_of = region_of
        self.bucket = bucket  # the one the policies name (a lab without one names a made-up one)
        self.role_policy: dict[str, Any] = {}
        self.user_policy: dict[str, Any] = {}
        front.iam.enabled = enabled
        front.iam.tags_of = self.tags_of
        front.iam.bucket_exists = self.bucket_exists

    def make_identities(self) -> None:
        """The user spotrun runs as and the instance role, with the policies the README gives."""
        iam = self.client("iam")
        trust = json.dumps(_TRUST)
        # Labs side by side share moto's one account: the first makes these, the others find them.
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=trust)
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_instance_profile(InstanceProfileName=INSTANCE_PROFILE)
        with contextlib.suppress(iam.exceptions.LimitExceededException):  # holds it already
            iam.add_role_to_instance_profile(InstanceProfileName=INSTANCE_PROFILE, RoleName=ROLE)
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_role(RoleName=CONTROLLER_ROLE, AssumeRolePolicyDocument=trust)
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_instance_profile(InstanceProfileName=CONTROLLER_PROFILE)
        with contextlib.suppress(iam.exceptions.LimitExceededException):
            iam.add_role_to_instance_profile(
                InstanceProfileName=CONTROLLER_PROFILE, RoleName=CONTROLLER_ROLE
            )
        self.role_policy = instance_policy(self.bucket, self.bucket)
        self.user_policy = user_policy(self.bucket, self.bucket, ROLE, CONTROLLER_ROLE)
        self.front.iam.profiles[INSTANCE_PROFILE] = f"arn:aws:iam::{ACCOUNT}:role/{ROLE}"
        self.front.iam.profiles[CONTROLLER_PROFILE] = (
            f"arn:aws:iam::{ACCOUNT}:role/{CONTROLLER_ROLE}"
        )
        self.front.iam.add(
            FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            Identity(f"arn:aws:iam::{ACCOUNT}:user/{USER}", (self.user_policy,)),
        )

    def credentials_reader(self, instance_id: str) -> Callable[[], dict[str, str] | None]:
        """What the instance's IMDS serves as role credentials: its session once EC2 says the
        instance has a profile (moto attaches it a moment after the instance appears)."""
        session: list[dict[str, str]] = []

        def read() -> dict[str, str] | None:
            if not session and self._has_profile(instance_id):
                session.append(self._session_of(instance_id))
            return session[0] if session else None

        return read

    def _has_profile(self, instance_id: str) -> bool:
        if instance_id in self.front.instance_profiles:
            return True
        ec2 = self.client("ec2", self.region_of(instance_id))
        try:
            found = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        except ClientError:
            return False
        return any(i.get("IamInstanceProfile") for r in found for i in r["Instances"])

    def _session_of(self, instance_id: str) -> dict[str, str]:
        """The role session of an instance launched with one of the lab's profiles, known to
        the front: a run's role, or the controller's (the user policy: it launches runs)."""
        credentials = role_credentials(instance_id)
        policies: tuple[dict[str, Any], ...]
        if self._profile_of(instance_id) == CONTROLLER_PROFILE:
            role, policies = CONTROLLER_ROLE, (self.user_policy, controller_stop_policy())
        else:
            role, policies = ROLE, (self.role_policy,)
        self.front.iam.add(
            credentials["AccessKeyId"],
            Identity(
                f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{instance_id}",
                policies,
                instance_id=instance_id,
            ),
        )
        return credentials

    def _profile_of(self, instance_id: str) -> str | None:
        if instance_id in self.front.instance_profiles:
            return self.front.instance_profiles[instance_id]
        ec2 = self.client("ec2", self.region_of(instance_id))
        found = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        for item in (i for r in found for i in r["Instances"]):
            arn = str((item.get("IamInstanceProfile") or {}).get("Arn", ""))
            return arn.rsplit("/", 1)[-1] or None
        return None

    def bucket_exists(self, bucket: str) -> bool:
        try:
            self.client("s3").head_bucket(Bucket=bucket)
        except ClientError:
            return False
        return True

    def tags_of(self, region: str, kind: str, resource_id: str) -> dict[str, str] | None:
        """An EC2 resource's tags in `region` as moto (or the front, for placement groups)
        holds them."""
        if kind == "placement-group":
            group = self.front.placement.groups.get(resource_id)
            if group is None or group.region != region:
                return None
            return dict(group.tags)
        calls: dict[str, tuple[str, dict[str, Any], str]] = {
            "instance": ("describe_instances", {"InstanceIds": [resource_id]}, "Reservations"),
            "volume": ("describe_volumes", {"VolumeIds": [resource_id]}, "Volumes"),
            "security-group": (
                "describe_security_groups",
                {"GroupIds": [resource_id]},
                "SecurityGroups",
            ),
            "key-pair": ("describe_key_pairs", {"KeyNames": [resource_id]}, "KeyPairs"),
            "spot-instances-request": (
                "describe_spot_instance_requests",
                {"SpotInstanceRequestIds": [resource_id]},
                "SpotInstanceRequests",
            ),
        }
        method, args, field_name = calls[kind]
        try:
            found = getattr(self.client("ec2", region), method)(**args)[field_name]
        except ClientError:
            return None  # EC2 knows no such resource
        if kind == "instance":
            found = [i for r in found for i in r["Instances"]]
        if not found:
            return None
        return {t["Key"]: t["Value"] for t in found[0].get("Tags", [])}
