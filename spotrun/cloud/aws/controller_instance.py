"""The controller's own on-demand instance (`spotrun controller up --on aws`).

It is tagged like a run's resources (spotrun:run-id, so the README's user policy may end it)
and spotrun:role=controller (so `gc` never takes it for an orphan), gets the key pair and
security group a run gets (SSH from this machine only), and the instance profile named by
aws.controller_instance_profile, whose role holds the run permissions: no credentials of this
machine travel to it.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from spotrun.cloud.aws import instances, network
from spotrun.cloud.aws.errors import aws_call
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.base import Offer
from spotrun.cloud.pricing_table import shipped_table
from spotrun.core.config import Settings
from spotrun.core.errors import CloudError, UsageError
from spotrun.core.waiting import wait_until

TAG_ROLE = "spotrun:role"
CONTROLLER_ROLE = "controller"
MIN_VCPUS = 2
MIN_MEMORY_MIB = 2048
DISK_GB = 20


@dataclass(frozen=True)
class ControllerInstance:
    instance_id: str
    resource_id: str  # its spotrun:run-id tag: names its key pair and security group
    region: str
    instance_type: str
    usd_per_hour: float | None  # on-demand list price (the shipped table)
    address: str
    key_file: Path
    ssh_user: str  # how spotrun reaches it (aws.ssh_user, aws.ssh_port)
    ssh_port: int
    python: str  # python on the instance (aws.python)
    disk_gb: int = DISK_GB


def cheapest_type(clients: AwsClients, region: str) -> tuple[str, float]:
    """The cheapest on-demand type (shipped table) with >= 2 vCPUs and >= 2 GiB that the
    region offers for the configured architecture."""
    table = shipped_table().prices.get(region, {})
    if not table:
        raise UsageError(
            f"spotrun has no on-demand prices for {region}",
            hint="name a type with --instance-type",
        )
    ranked = sorted(table.items(), key=lambda kv: (kv[1], kv[0]))
    ec2 = clients.client("ec2", region)
    arch = clients.settings.architecture
    for start in range(0, len(ranked), 50):
        batch = dict(ranked[start : start + 50])
        with aws_call("ec2", "DescribeInstanceTypes", region):
            found = ec2.describe_instance_types(
                Filters=[{"Name": "instance-type", "Values": list(batch)}]
            )["InstanceTypes"]
        fits = [
            t["InstanceType"]
            for t in found
            if t["VCpuInfo"]["DefaultVCpus"] >= MIN_VCPUS
            and t["MemoryInfo"]["SizeInMiB"] >= MIN_MEMORY_MIB
            and arch in t.get("ProcessorInfo", {}).get("SupportedArchitectures", [arch])
        ]
        if fits:
            best = min(fits, key=lambda name: (batch[name], name))
            return best, batch[best]
    raise CloudError(f"{region} offers no instance type with 2 vCPUs and 2 GiB for {arch}")


def launch(
    settings: Settings, region: str, instance_type: str | None, keys_dir: Path
) -> ControllerInstance:
    """Start the controller's instance and wait until it runs and has an address."""
    aws = settings.aws
    if not aws.controller_instance_profile:
        raise UsageError(
            "aws.controller_instance_profile is not set: the controller instance needs a role "
            "with the run permissions (the README's user policy)",
            hint="create an instance profile whose role holds that policy and name it in "
            'config.toml ([aws] controller_instance_profile = "...")',
        )
    clients = AwsClients(aws)
    if instance_type is None:
        instance_type, price = cheapest_type(clients, region)
    else:
        price = shipped_table().price(region, instance_type) or 0.0
    resource_id = f"controller-{secrets.token_hex(4)}"
    tags = network.run_tags(resource_id, settings.owner, time.time() + 10 * 365 * 86400)
    tags.append({"Key": TAG_ROLE, "Value": CONTROLLER_ROLE})
    subnet = sorted(network.launch_subnets(clients, region).values(), key=lambda s: s.zone)[0]
    key_name = network.ensure_key_pair(clients, region, keys_dir, resource_id, tags)
    group = network.ensure_security_group(clients, region, subnet, resource_id, tags)
    offer = Offer(
        "aws", instance_type, region, subnet.zone, 0, None, None, MIN_VCPUS, 2.0, None,
        price, market="on-demand",
    )  # fmt: skip
    params = instances.run_instances_params(
        run_id=resource_id,
        offer=offer,
        count=1,
        image=instances.resolve_image(clients, region),
        subnet_id=subnet.id,
        security_group_id=group,
        key_name=key_name,
        disk_gb=DISK_GB,
        tags=tags,
        token=f"spotrun-{resource_id}",
        public_address=aws.ssh_address == "public",
        instance_profile=aws.controller_instance_profile,
    )
    params["InstanceInitiatedShutdownBehavior"] = "stop"  # a stop is not the controller's end
    try:
        item = instances.run_instances(clients, region, params)[0]
    except CloudError:
        network.delete_run_network(clients, region, resource_id)
        raise
    instance_id = str(item["InstanceId"])
    address = _wait_address(clients, region, instance_id, settings.run.ssh_timeout_s)
    return ControllerInstance(
        instance_id,
        resource_id,
        region,
        instance_type,
        price or None,
        address,
        network.key_path(keys_dir, resource_id),
        aws.ssh_user,
        aws.ssh_port,
        aws.python,
    )


def _wait_address(clients: AwsClients, region: str, instance_id: str, timeout_s: float) -> str:
    seen: list[str] = []

    def running() -> bool:
        found = instances.describe_ids(clients, region, [instance_id], fresh=[instance_id])
        if not found:
            return False
        state = found[0].state
        if state not in ("pending", "running"):
            raise CloudError(f"the controller instance {instance_id} is {state}")
        if state == "running" and found[0].address:
            seen.append(str(found[0].address))
            return True
        return False

    wait_until(
        running,
        timeout_s=timeout_s,
        what=f"{instance_id} to run",
    )
    return seen[-1]


def terminate(settings: Settings, region: str, instance_id: str, resource_id: str) -> list[str]:
    """End the instance and delete its key pair and security group; returns what is left."""
    clients = AwsClients(settings.aws)
    instances.terminate_ids(clients, region, [instance_id], wait_s=600)
    return network.delete_run_network(clients, region, resource_id)


# ------------------------------------------------------------------ idle stop and start
@dataclass(frozen=True)
class ControllerState:
    state: str  # EC2's: pending, running, stopping, stopped, shutting-down, terminated
    address: str | None  # the one spotrun connects to (aws.ssh_address), while it runs
    since: float | None  # when EC2 began stopping or ending it (StateTransitionReason)


def describe(settings: Settings, region: str, instance_id: str) -> ControllerState:
    """The controller instance as EC2 sees it now ("terminated" once EC2 forgot it)."""
    found = instances.describe_ids(AwsClients(settings.aws), region, [instance_id])
    if not found:
        return ControllerState("terminated", None, None)
    item = found[0]
    return ControllerState(item.state, item.address, item.ended_at)


def start(settings: Settings, region: str, instance_id: str, timeout_s: float) -> str:
    """Start the stopped controller instance (waiting out a stop under way first) and wait
    until it runs; its address, which a public one changes at every start."""
    clients = AwsClients(settings.aws)
    ec2 = clients.client("ec2", region)

    def stopped() -> bool:
        state = describe(settings, region, instance_id).state
        if state in ("shutting-down", "terminated"):
            raise CloudError(f"the controller instance {instance_id} is {state}")
        return state in ("stopped", "pending", "running")

    wait_until(stopped, timeout_s=timeout_s, what=f"{instance_id} to finish stopping")
    with aws_call("ec2", "StartInstances", region):
        ec2.start_instances(InstanceIds=[instance_id])
    return _wait_address(clients, region, instance_id, timeout_s)


def stop_self(settings: Settings, region: str, instance_id: str) -> None:
    """Stop this controller instance (its role may stop itself only, tagged as controller);
    its root volume, with the controller's home, stays for the next start."""
    clients = AwsClients(settings.aws)
    with aws_call("ec2", "StopInstances", region):
        clients.client("ec2", region).stop_instances(InstanceIds=[instance_id])
