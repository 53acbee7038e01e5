"""`--dry-run`: ask EC2, with DryRun, whether these credentials may do what a launch does.

EC2 checks permissions first: DryRunOperation means the call would have succeeded. Nothing is
created; the key pair offered is a throwaway whose private half is never kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from botocore.exceptions import ClientError

from spotrun.cloud.aws import instances as ec2i
from spotrun.cloud.aws import network
from spotrun.cloud.aws.errors import aws_call, error_code
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.base import Offer

# For the made-up instance id, not-found also means the permission check passed.
PASSING = frozenset(
    {"DryRunOperation", "InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"}
)


def dry_run(
    clients: AwsClients,
    offer: Offer,
    image: ec2i.Image,
    subnet: network.Subnet,
    owner: str,
    disk_gb: int,
) -> list[str]:
    """The operations a launch needs that EC2 says are permitted; raises on the first refusal."""
    settings = clients.settings
    region = offer.region
    ec2 = clients.client("ec2", region)
    params = ec2i.run_instances_params(
        run_id="dry-run",
        offer=offer,
        count=1,
        image=image,
        subnet_id=subnet.id,
        security_group_id=None,
        key_name=None,
        disk_gb=disk_gb,
        tags=network.run_tags("dry-run", owner, time.time()),
        token=f"spotrun-dry-run-{time.time_ns()}",
        public_address=settings.ssh_address == "public",
        instance_profile=settings.instance_profile,
    )
    checks: dict[str, Callable[[], object]] = {
        "RunInstances": lambda: ec2.run_instances(**params, DryRun=True),
        "CreateSecurityGroup": lambda: ec2.create_security_group(
            GroupName="spotrun-dry-run", Description="dry run", VpcId=subnet.vpc_id, DryRun=True
        ),
        "ImportKeyPair": lambda: ec2.import_key_pair(
            KeyName="spotrun-dry-run",
            PublicKeyMaterial=network.ephemeral_public_key().encode(),
            DryRun=True,
        ),
        "TerminateInstances": lambda: ec2.terminate_instances(
            InstanceIds=["i-0123456789abcdef0"], DryRun=True
        ),
    }
    passed = []
    for operation, check in checks.items():
        with aws_call("ec2", operation, region, instance_type=offer.instance_type):
            try:
                check()
            except ClientError as exc:
                if error_code(exc) not in PASSING:
                    raise
        passed.append(operation)
    return passed
