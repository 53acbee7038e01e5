"""EC2 instances of a run: the image, the launch request, finding them by tag, terminating.

Launching is safe to repeat: the run's instances are found by their spotrun:run-id tag first
and only the shortfall is asked for, with a ClientToken derived from the run id, the offer and
how many instances the run has had, so a call that botocore repeats after a lost answer (or a
supervisor that repeats it after a crash) cannot make a second set.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from botocore.exceptions import ClientError

from spotrun.cloud.aws.errors import aws_call, error_code, error_message
from spotrun.cloud.aws.network import TAG_RUN, tag_specs
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.base import Instance, Offer
from spotrun.core.errors import UsageError
from spotrun.core.waiting import Backoff, WaitTimeout, wait_until

LIVE_STATES = ("pending", "running")
ALL_STATES = ("pending", "running", "shutting-down", "terminated", "stopping", "stopped")
BILLABLE_STATES = ("pending", "running", "stopping", "stopped")
NOT_FOUND = "InvalidInstanceID.NotFound"
_INSTANCE_ID = re.compile(r"\bi-[0-9a-f]{8,17}\b")
_REASON_TIME = re.compile(r"\((\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) (?:GMT|UTC)\)")


@dataclass(frozen=True)
class Image:
    id: str
    root_device: str
    architecture: str
    source: str  # where the id came from, for messages


def resolve_image(clients: AwsClients, region: str) -> Image:
    """The AMI to launch: aws.image_id, else the one the SSM parameter names."""
    settings = clients.settings
    if settings.image_id:
        image_id, source = settings.image_id, "aws.image_id"
    else:
        name = settings.image_ssm_parameter
        source = f"SSM parameter {name}"
        with aws_call("ssm", "GetParameter", region):
            try:
                image_id = clients.client("ssm", region).get_parameter(Name=name)["Parameter"][
                    "Value"
                ]
            except ClientError as exc:
                if error_code(exc) in ("ParameterNotFound", "ValidationException"):
                    raise UsageError(
                        f"the {source} does not exist in {region}",
                        hint="set aws.image_id (an AMI id) or aws.image_ssm_parameter",
                    ) from exc
                raise
    with aws_call("ec2", "DescribeImages", region):
        try:
            images = clients.client("ec2", region).describe_images(ImageIds=[image_id])["Images"]
        except ClientError as exc:
            if error_code(exc).startswith("InvalidAMIID"):
                images = []
            else:
                raise
    if not images:
        raise UsageError(
            f"image {image_id} (from {source}) does not exist in {region}",
            hint="check the AMI id and its region, or build one with ami/ (see ami/README.md)",
        )
    image = images[0]
    if image.get("State", "available") != "available":
        raise UsageError(f"image {image_id} (from {source}) is {image.get('State')}, not available")
    arch = str(image.get("Architecture", settings.architecture))
    if arch != settings.architecture:
        raise UsageError(
            f"image {image_id} is built for {arch}, but aws.architecture is {settings.architecture}"
        )
    return Image(image_id, str(image.get("RootDeviceName") or "/dev/sda1"), arch, source)


def client_token(run_id: str, offer: Offer, launched_before: int) -> str:
    """Same request, same token: EC2 answers a repeat with the instances of the first call."""
    key = f"{run_id}/{offer.instance_type}/{offer.zone}/{offer.market}/{launched_before}"
    return f"spotrun-{run_id}-{hashlib.sha256(key.encode()).hexdigest()[:24]}"


def run_instances_params(
    *,
    run_id: str,
    offer: Offer,
    count: int,
    image: Image,
    subnet_id: str,
    security_group_id: str | None,
    key_name: str | None,
    disk_gb: int,
    tags: list[dict[str, str]],
    token: str,
    public_address: bool,
    instance_profile: str | None,
    placement_group: str | None = None,
    efa: bool = False,
    metadata_hop_limit: int = 1,
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "ImageId": image.id,
        "InstanceType": offer.instance_type,
        "MinCount": count,
        "MaxCount": count,
        "ClientToken": token,
        # IMDSv2 only: a token is needed to read metadata (and the instance role's credentials);
        # one hop, so a container on the instance cannot read them unless a setting asks
        "MetadataOptions": {
            "HttpTokens": "required",
            "HttpEndpoint": "enabled",
            "HttpPutResponseHopLimit": metadata_hop_limit,
        },
        "BlockDeviceMappings": [
            {
                "DeviceName": image.root_device,
                "Ebs": {
                    "VolumeSize": disk_gb,
                    "VolumeType": "gp3",
                    "Encrypted": True,
                    "DeleteOnTermination": True,
                },
            }
        ],
        # A shutdown from inside (the agent's watchdog) ends the billing, not just the OS.
        "InstanceInitiatedShutdownBehavior": "terminate",
        "TagSpecifications": tag_specs(["instance", "volume"], tags),
    }
    if key_name:
        params["KeyName"] = key_name
    if offer.market == "spot":
        params["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {
                "SpotInstanceType": "one-time",
                "InstanceInterruptionBehavior": "terminate",
            },
        }
    if placement_group:  # a multi-node run: its nodes side by side in one zone
        params["Placement"] = {"GroupName": placement_group, "AvailabilityZone": offer.zone}
    groups = [security_group_id] if security_group_id else []
    if public_address or efa:
        interface: dict[str, Any] = {
            "DeviceIndex": 0,
            "SubnetId": subnet_id,
            "Groups": groups,
            "DeleteOnTermination": True,
        }
        if public_address:
            interface["AssociatePublicIpAddress"] = True
        if efa:  # NCCL reaches the other nodes over EFA (libfabric's efa provider)
            interface["InterfaceType"] = "efa"
        params["NetworkInterfaces"] = [interface]
    else:
        params["SubnetId"] = subnet_id
        if groups:
            params["SecurityGroupIds"] = groups
    if instance_profile:
        params["IamInstanceProfile"] = {"Name": instance_profile}
    return params


def _timestamp(value: Any) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else None


def ended_at(item: dict[str, Any]) -> float | None:
    """When EC2 began ending the instance, from its StateTransitionReason, if it says."""
    match = _REASON_TIME.search(str(item.get("StateTransitionReason") or ""))
    if not match:
        return None
    moment = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
    return moment.replace(tzinfo=timezone.utc).timestamp()


def to_instance(item: dict[str, Any], region: str, private: bool, node_index: int) -> Instance:
    tags = {t["Key"]: t["Value"] for t in item.get("Tags", [])}
    state = str(item.get("State", {}).get("Name", "pending"))
    reason = (item.get("StateReason") or {}).get("Message") or item.get("StateTransitionReason")
    return Instance(
        id=item["InstanceId"],
        run_id=tags.get(TAG_RUN, ""),
        provider="aws",
        instance_type=item["InstanceType"],
        region=region,
        zone=str(item.get("Placement", {}).get("AvailabilityZone", "")),
        market="spot" if item.get("InstanceLifecycle") == "spot" else "on-demand",
        state=state,
        address=item.get("PrivateIpAddress") if private else item.get("PublicIpAddress"),
        launched_at=_timestamp(item.get("LaunchTime")),
        node_index=node_index,
        state_reason=str(reason) if reason and state not in LIVE_STATES else None,
        ended_at=ended_at(item) if state not in LIVE_STATES else None,
        private_address=item.get("PrivateIpAddress"),
    )


def describe_run(
    clients: AwsClients, region: str, run_id: str, fresh: list[str] | None = None
) -> list[Instance]:
    """Every instance of the run, live ones first in node order: those tagged with the run id,
    and those spotrun has just made for it (`fresh`) that EC2's filtered listing leaves out
    while it is still catching up (eventual consistency)."""
    ec2 = clients.client("ec2", region)
    items: list[dict[str, Any]] = []
    with aws_call("ec2", "DescribeInstances", region):
        for page in ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": f"tag:{TAG_RUN}", "Values": [run_id]},
                {"Name": "instance-state-name", "Values": list(ALL_STATES)},
            ]
        ):
            for reservation in page.get("Reservations", []):
                items.extend(reservation.get("Instances", []))
    listed = {str(item["InstanceId"]) for item in items}
    unlisted = [i for i in fresh or [] if i not in listed]
    if unlisted:
        items += _describe_items(clients, region, unlisted, unlisted)
    private = clients.settings.ssh_address == "private"

    def order(item: dict[str, Any]) -> tuple[bool, float, int, str]:
        live = item.get("State", {}).get("Name") in LIVE_STATES
        launched = _timestamp(item.get("LaunchTime")) or 0.0
        return (not live, launched, int(item.get("AmiLaunchIndex", 0)), item["InstanceId"])

    return [
        replace(to_instance(item, region, private, i), run_id=run_id)
        for i, item in enumerate(sorted(items, key=order))
    ]


def describe_ids(
    clients: AwsClients, region: str, ids: list[str], *, fresh: list[str] | None = None
) -> list[Instance]:
    """The instances `ids` name. `fresh`: those just made, which EC2 may not know yet; they
    are asked for again until aws.consistency_s. Ids EC2 no longer knows are left out (it
    forgets terminated instances after about an hour)."""
    private = clients.settings.ssh_address == "private"
    items = _describe_items(clients, region, ids, fresh or [])
    return [to_instance(item, region, private, n) for n, item in enumerate(items)]


def _describe_items(
    clients: AwsClients, region: str, ids: list[str], fresh: list[str]
) -> list[dict[str, Any]]:
    if not ids:
        return []
    ec2 = clients.client("ec2", region)
    asking = list(ids)
    young = set(fresh)

    def ask() -> list[dict[str, Any]] | None:
        with aws_call("ec2", "DescribeInstances", region):
            try:
                reservations = ec2.describe_instances(InstanceIds=asking)["Reservations"]
            except ClientError as exc:
                if error_code(exc) != NOT_FOUND:
                    raise
                unknown = set(_INSTANCE_ID.findall(error_message(exc))) & set(asking) or set(asking)
                asking[:] = [i for i in asking if i not in unknown or i in young]
                if not asking:
                    return []
                if unknown & young:
                    return None  # EC2 has not caught up yet: ask again shortly
                return ask()
        return [i for r in reservations for i in r.get("Instances", [])]

    try:
        return wait_until(
            ask,
            timeout_s=clients.settings.consistency_s,
            what=f"EC2 to know {', '.join(sorted(young))}",
            backoff=Backoff(first_s=0.1, factor=1.5, max_s=2.0),
        )
    except WaitTimeout:
        young.clear()  # past the bound, an id EC2 never came to know is taken as gone
        return ask() or []


def run_instances(
    clients: AwsClients, region: str, params: dict[str, Any], *, dry_run: bool = False
) -> list[dict[str, Any]]:
    ec2 = clients.client("ec2", region)
    spot = "InstanceMarketOptions" in params
    with aws_call("ec2", "RunInstances", region, instance_type=params["InstanceType"], spot=spot):
        response = ec2.run_instances(**params, DryRun=dry_run)
    return list(response.get("Instances", []))


def terminate_ids(clients: AwsClients, region: str, ids: list[str], wait_s: float) -> None:
    """Terminate `ids` and wait until EC2 itself reports them terminated."""
    if not ids:
        return
    ec2 = clients.client("ec2", region)
    with aws_call("ec2", "TerminateInstances", region):
        ec2.terminate_instances(InstanceIds=ids)
    delay = 5
    with aws_call("ec2", "waiting for TerminateInstances", region):
        ec2.get_waiter("instance_terminated").wait(
            InstanceIds=ids,
            WaiterConfig={"Delay": delay, "MaxAttempts": max(1, int(wait_s // delay))},
        )
