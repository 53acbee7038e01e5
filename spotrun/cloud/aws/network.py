"""What an instance needs around it: a subnet per zone, the run's SSH key pair and its
security group, every one tagged with the run id so it can be found again and cleaned up.

The key pair is made here (Ed25519, private key 0600 under SPOTRUN_HOME) and only its public
half is imported; the security group admits SSH from this machine's own address alone (/32).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from spotrun.cloud.aws.errors import aws_call, error_code
from spotrun.cloud.aws.session import AwsClients
from spotrun.core.errors import CloudError, UsageError
from spotrun.core.waiting import Backoff, WaitTimeout, wait_until

TAG_RUN = "spotrun:run-id"
TAG_OWNER = "spotrun:owner"
TAG_EXPIRES = "spotrun:expires"
TAG_NODE = "spotrun:node"


# How boto3's *_exists waiters wait for a resource EC2 made a moment ago to be known (EC2's
# eventual consistency lasts seconds; its default 5 s first delay would be most of the wait).
FRESH_WAIT = {"Delay": 1, "MaxAttempts": 60}


def resource_name(run_id: str) -> str:
    return f"spotrun-{run_id}"


def run_tags(run_id: str, owner: str, expires_at: float) -> list[dict[str, str]]:
    expires = datetime.fromtimestamp(expires_at, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        {"Key": "Name", "Value": resource_name(run_id)},
        {"Key": TAG_RUN, "Value": run_id},
        {"Key": TAG_OWNER, "Value": owner},
        {"Key": TAG_EXPIRES, "Value": expires},
    ]


def tag_specs(kinds: list[str], tags: list[dict[str, str]]) -> list[dict[str, object]]:
    return [{"ResourceType": kind, "Tags": tags} for kind in kinds]


# ------------------------------------------------------------------ subnets
@dataclass(frozen=True)
class Subnet:
    id: str
    vpc_id: str
    zone: str
    cidr: str


def launch_subnets(clients: AwsClients, region: str) -> dict[str, Subnet]:
    """One subnet per zone spotrun may launch in: the configured ones of `region` (the list
    may name subnets of several regions), else the region's default VPC's."""
    settings = clients.settings
    ids = list(settings.subnet_ids) or ([settings.subnet_id] if settings.subnet_id else [])
    ec2 = clients.client("ec2", region)
    with aws_call("ec2", "DescribeSubnets", region):
        if ids:
            # by filter: ids of other regions are left out, not an error
            found = ec2.describe_subnets(Filters=[{"Name": "subnet-id", "Values": ids}])["Subnets"]
            if not found:
                raise UsageError(
                    f"{region} does not have any of the subnets aws.subnet_ids names: {ids}",
                    hint=f"add subnets of {region} to aws.subnet_ids, or launch in another region",
                )
        else:
            found = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])[
                "Subnets"
            ]
    subnets: dict[str, Subnet] = {}
    for item in found:
        subnet = Subnet(
            item["SubnetId"], item["VpcId"], item["AvailabilityZone"], item["CidrBlock"]
        )
        subnets.setdefault(subnet.zone, subnet)
    if not subnets:
        raise UsageError(
            f"no subnet to launch in: {region} has no default VPC",
            hint="set aws.subnet_ids in config.toml to subnets of your VPC",
        )
    if len({s.vpc_id for s in subnets.values()}) > 1:
        raise UsageError("aws.subnet_ids must all be in one VPC")
    return subnets


# ------------------------------------------------------------- caller CIDR
def caller_cidr(clients: AwsClients, subnet: Subnet) -> str:
    """The one address SSH is admitted from: this machine, as the instance will see it."""
    settings = clients.settings
    if settings.ssh_cidr:
        return str(ipaddress.ip_network(settings.ssh_cidr, strict=False))
    if settings.ssh_address == "private":
        # Inside the VPC: the source address the kernel picks for the subnet (UDP connect
        # sends nothing, it only chooses the route).
        target = str(next(ipaddress.ip_network(subnet.cidr).hosts()))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((target, settings.ssh_port))
            return f"{probe.getsockname()[0]}/32"
    try:
        with urllib.request.urlopen(settings.caller_ip_url, timeout=10) as response:
            address = response.read().decode().strip()
        return f"{ipaddress.ip_address(address)}/32"
    except (OSError, ValueError) as exc:
        raise CloudError(
            f"cannot learn this machine's public address from {settings.caller_ip_url}: {exc}",
            hint="set aws.ssh_cidr in config.toml to the address SSH should come from",
        ) from exc


# ------------------------------------------------------------------- keys
def key_path(keys_dir: Path, run_id: str) -> Path:
    return keys_dir / run_id / "id_ed25519"


def local_key(keys_dir: Path, run_id: str) -> tuple[Path, str]:
    """The run's private key file (made 0600 if new) and its OpenSSH public key line."""
    path = key_path(keys_dir, run_id)
    if path.exists():
        private = serialization.load_ssh_private_key(path.read_bytes(), password=None)
        if not isinstance(private, Ed25519PrivateKey):
            raise CloudError(f"{path} is not an Ed25519 key; move it aside and launch again")
    else:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        private = Ed25519PrivateKey.generate()
        pem = private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
        os.replace(tmp, path)
    public = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return path, public.decode()


def ephemeral_public_key() -> str:
    """A throwaway public key (for DryRun checks); its private half is never kept."""
    public = Ed25519PrivateKey.generate().public_key()
    return public.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()


def ensure_key_pair(
    clients: AwsClients, region: str, keys_dir: Path, run_id: str, tags: list[dict[str, str]]
) -> str:
    """Import the run's public key as an EC2 key pair unless it is there; returns its name."""
    name = resource_name(run_id)
    _, public = local_key(keys_dir, run_id)
    ec2 = clients.client("ec2", region)
    with aws_call("ec2", "DescribeKeyPairs", region):
        try:
            found = ec2.describe_key_pairs(KeyNames=[name], IncludePublicKey=True)["KeyPairs"]
        except ClientError as exc:
            if error_code(exc) != "InvalidKeyPair.NotFound":
                raise
            found = []
    if found:
        known = " ".join(str(found[0].get("PublicKey", "")).split()[:2])
        if known == " ".join(public.split()[:2]):
            return name
        with aws_call("ec2", "DeleteKeyPair", region):  # stale: made from a lost local key
            ec2.delete_key_pair(KeyName=name)
    with aws_call("ec2", "ImportKeyPair", region):
        ec2.import_key_pair(
            KeyName=name,
            PublicKeyMaterial=public.encode(),
            TagSpecifications=tag_specs(["key-pair"], tags),
        )
    # EC2 is eventually consistent: RunInstances naming a key pair imported a moment ago can
    # answer InvalidKeyPair.NotFound. The waiter retries exactly that code.
    with aws_call("ec2", "DescribeKeyPairs", region):
        ec2.get_waiter("key_pair_exists").wait(KeyNames=[name], WaiterConfig=FRESH_WAIT)
    return name


# --------------------------------------------------------- security group
SSH_RULE = "spotrun: SSH"  # the description of the one SSH rule spotrun adds (and revokes)


def ensure_security_group(
    clients: AwsClients, region: str, subnet: Subnet, run_id: str, tags: list[dict[str, str]]
) -> str:
    """The run's security group in the subnet's VPC: SSH from the caller's /32 only."""
    name = resource_name(run_id)
    port = clients.settings.ssh_port
    ec2 = clients.client("ec2", region)
    with aws_call("ec2", "DescribeSecurityGroups", region):
        groups = ec2.describe_security_groups(
            Filters=[
                {"Name": "group-name", "Values": [name]},
                {"Name": "vpc-id", "Values": [subnet.vpc_id]},
            ]
        )["SecurityGroups"]
    cidr = caller_cidr(clients, subnet)
    stale: list[str] = []
    if groups:
        group_id = str(groups[0]["GroupId"])
        ours = {
            str(r.get("CidrIp"))
            for perm in groups[0].get("IpPermissions", [])
            if perm.get("FromPort") == port and perm.get("IpProtocol") == "tcp"
            for r in perm.get("IpRanges", [])
            if r.get("Description") == SSH_RULE
        }
        stale = sorted(ours - {cidr})  # the caller moved: its old address is let in no more
        if cidr in ours and not stale:
            return group_id
    else:
        with aws_call("ec2", "CreateSecurityGroup", region):
            group_id = str(
                ec2.create_security_group(
                    GroupName=name,
                    Description=f"spotrun run {run_id}: SSH from the launching machine only",
                    VpcId=subnet.vpc_id,
                    TagSpecifications=tag_specs(["security-group"], tags),
                )["GroupId"]
            )
        # A group made a moment ago can be InvalidGroup.NotFound to the rule and RunInstances.
        with aws_call("ec2", "DescribeSecurityGroups", region):
            ec2.get_waiter("security_group_exists").wait(
                GroupIds=[group_id], WaiterConfig=FRESH_WAIT
            )
    ssh_in = {
        "IpProtocol": "tcp",
        "FromPort": port,
        "ToPort": port,
        "IpRanges": [{"CidrIp": cidr, "Description": SSH_RULE}],
    }
    _authorize_ingress(clients, region, group_id, ssh_in)
    if stale:
        old_in = {**ssh_in, "IpRanges": [{"CidrIp": old} for old in stale]}
        with aws_call("ec2", "RevokeSecurityGroupIngress", region):
            ec2.revoke_security_group_ingress(GroupId=group_id, IpPermissions=[old_in])
    return group_id


def allow_within_group(clients: AwsClients, region: str, group_id: str) -> None:
    """A multi-node run's nodes reach each other on every port (torchrun's rendezvous, NCCL's
    sockets; EFA needs all traffic within the group): inbound from the group itself."""
    from_group = {
        "IpProtocol": "-1",
        "UserIdGroupPairs": [{"GroupId": group_id, "Description": "spotrun: between nodes"}],
    }
    _authorize_ingress(clients, region, group_id, from_group)


def _authorize_ingress(
    clients: AwsClients, region: str, group_id: str, permission: dict[str, Any]
) -> None:
    """Add one inbound rule; a rule already there (a repeated launch step) is no error."""
    with aws_call("ec2", "AuthorizeSecurityGroupIngress", region):
        try:
            clients.client("ec2", region).authorize_security_group_ingress(
                GroupId=group_id, IpPermissions=[permission]
            )
        except ClientError as exc:
            if error_code(exc) != "InvalidPermission.Duplicate":
                raise


# ---------------------------------------------------------------- cleanup
def delete_run_network(
    clients: AwsClients, region: str, run_id: str, *, timeout_s: float = 120.0
) -> list[str]:
    """Delete the run's security groups and key pair; safe to repeat. Returns what is left."""
    ec2 = clients.client("ec2", region)
    left: list[str] = []
    with aws_call("ec2", "DescribeSecurityGroups", region):
        groups = ec2.describe_security_groups(
            Filters=[{"Name": f"tag:{TAG_RUN}", "Values": [run_id]}]
        )["SecurityGroups"]
    for group in groups:
        group_id = str(group["GroupId"])

        def deleted(group_id: str = group_id) -> bool:
            try:
                with aws_call("ec2", "DeleteSecurityGroup", region):
                    ec2.delete_security_group(GroupId=group_id)
            except CloudError as exc:
                # Network interfaces of terminated instances linger for a few seconds.
                if "DependencyViolation" in exc.message:
                    return False
                if "InvalidGroup.NotFound" in exc.message:
                    return True
                raise
            return True

        try:
            wait_until(
                deleted,
                timeout_s=timeout_s,
                what=f"security group {group_id} to be free",
                backoff=Backoff(first_s=1.0, max_s=5.0),
            )
        except WaitTimeout:
            left.append(group_id)
    with aws_call("ec2", "DeleteKeyPair", region):
        ec2.delete_key_pair(KeyName=resource_name(run_id))  # no error when it is gone
    return left


def expiry(max_hours: float | None, default_hours: float) -> float:
    return time.time() + 3600.0 * (max_hours or default_hours)
