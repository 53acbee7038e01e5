"""`spotrun gc`: find, then remove, what spotrun made on AWS that no live run owns.

Everything spotrun creates carries the spotrun:run-id tag (instances, volumes, key pairs,
security groups; spot requests through their instance). A resource is an orphan when its run
is not live in this machine's ledger (ended, failed, or unknown here) and its spotrun:owner
tag is this user's: other users' runs in the same account are never touched. Every configured
region (aws.regions, else aws.region) is searched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spotrun.cloud.aws.controller_instance import CONTROLLER_ROLE, TAG_ROLE
from spotrun.cloud.aws.errors import aws_call
from spotrun.cloud.aws.instances import describe_ids, terminate_ids
from spotrun.cloud.aws.network import TAG_OWNER, TAG_RUN
from spotrun.cloud.aws.session import AwsClients
from spotrun.core.config import Settings
from spotrun.core.errors import CloudError

KINDS = (
    "spot-request",
    "instance",
    "volume",
    "key-pair",
    "security-group",
    "placement-group",
)  # removal order
_TAGGED = [{"Name": "tag-key", "Values": [TAG_RUN]}]


@dataclass(frozen=True)
class Orphan:
    kind: str
    id: str
    region: str
    run_id: str
    detail: str = ""


def _tags(item: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in item.get("Tags", [])}


def find_orphans(settings: Settings, live_runs: set[str]) -> list[Orphan]:
    clients = AwsClients(settings.aws)
    regions = list(settings.aws.regions) or [settings.aws.region]
    found: list[Orphan] = []
    for region in regions:
        found += _find_in(clients, region, settings.owner, live_runs)
    order = {kind: n for n, kind in enumerate(KINDS)}
    return sorted(found, key=lambda o: (order[o.kind], o.region, o.id))


def _find_in(clients: AwsClients, region: str, owner: str, live: set[str]) -> list[Orphan]:
    ec2 = clients.client("ec2", region)

    def orphan_run(item: dict[str, Any]) -> str | None:
        tags = _tags(item)
        run_id = tags.get(TAG_RUN)
        if not run_id or run_id in live or tags.get(TAG_OWNER, owner) != owner:
            return None
        if tags.get(TAG_ROLE) == CONTROLLER_ROLE:  # the controller's own: `controller down`
            return None
        return run_id

    found: list[Orphan] = []
    instance_runs: dict[str, str] = {}
    with aws_call("ec2", "DescribeInstances", region):
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[
                *_TAGGED,
                {
                    "Name": "instance-state-name",
                    "Values": ["pending", "running", "stopping", "stopped"],
                },
            ]
        )
        items = [i for page in pages for r in page["Reservations"] for i in r["Instances"]]
    for item in items:
        run_id = orphan_run(item)
        if run_id:
            instance_runs[item["InstanceId"]] = run_id
            detail = f"{item['InstanceType']} {item['State']['Name']}"
            found.append(Orphan("instance", item["InstanceId"], region, run_id, detail))
    with aws_call("ec2", "DescribeSpotInstanceRequests", region):
        requests = ec2.describe_spot_instance_requests(
            Filters=[{"Name": "state", "Values": ["open", "active"]}]
        )["SpotInstanceRequests"]
    for req in requests:
        run_id = orphan_run(req) or instance_runs.get(str(req.get("InstanceId")))
        if run_id:
            found.append(
                Orphan("spot-request", req["SpotInstanceRequestId"], region, run_id, req["State"])
            )
    with aws_call("ec2", "DescribeVolumes", region):
        volumes = ec2.describe_volumes(
            Filters=[*_TAGGED, {"Name": "status", "Values": ["available"]}]
        )["Volumes"]
    for vol in volumes:
        run_id = orphan_run(vol)
        if run_id:
            found.append(Orphan("volume", vol["VolumeId"], region, run_id, f"{vol['Size']} GB"))
    with aws_call("ec2", "DescribeKeyPairs", region):
        pairs = ec2.describe_key_pairs(Filters=_TAGGED)["KeyPairs"]
    for pair in pairs:
        run_id = orphan_run(pair)
        if run_id:
            found.append(Orphan("key-pair", pair["KeyName"], region, run_id))
    with aws_call("ec2", "DescribeSecurityGroups", region):
        groups = ec2.describe_security_groups(Filters=_TAGGED)["SecurityGroups"]
    for group in groups:
        run_id = orphan_run(group)
        if run_id:
            found.append(
                Orphan("security-group", group["GroupId"], region, run_id, group["GroupName"])
            )
    with aws_call("ec2", "DescribePlacementGroups", region):  # multi-node runs' groups
        placements = ec2.describe_placement_groups(Filters=_TAGGED)["PlacementGroups"]
    for placement in placements:
        run_id = orphan_run(placement)
        if run_id:
            found.append(Orphan("placement-group", placement["GroupName"], region, run_id))
    return found


def remove(settings: Settings, orphans: list[Orphan]) -> dict[Orphan, str | None]:
    """Remove `orphans` (spot requests, instances, then what they used); per orphan None when
    it is gone, else why it is not."""
    clients = AwsClients(settings.aws)
    results: dict[Orphan, str | None] = {}
    for kind in KINDS:
        batch = [o for o in orphans if o.kind == kind]
        for region in sorted({o.region for o in batch}):
            here = [o for o in batch if o.region == region]
            ec2 = clients.client("ec2", region)
            if kind == "instance":
                try:
                    terminate_ids(
                        clients, region, [o.id for o in here], wait_s=settings.run.ssh_timeout_s
                    )
                    left = {
                        i.id
                        for i in describe_ids(clients, region, [o.id for o in here])
                        if i.state != "terminated"
                    }
                    for o in here:
                        results[o] = "still ending" if o.id in left else None
                except CloudError as exc:
                    for o in here:
                        results[o] = exc.message
                continue
            for o in here:
                try:
                    _remove_one(ec2, o)
                    results[o] = None
                except CloudError as exc:
                    results[o] = exc.message
    return results


def _remove_one(ec2: Any, orphan: Orphan) -> None:
    region = orphan.region
    if orphan.kind == "spot-request":
        with aws_call("ec2", "CancelSpotInstanceRequests", region):
            ec2.cancel_spot_instance_requests(SpotInstanceRequestIds=[orphan.id])
    elif orphan.kind == "volume":
        with aws_call("ec2", "DeleteVolume", region):
            ec2.delete_volume(VolumeId=orphan.id)
    elif orphan.kind == "key-pair":
        with aws_call("ec2", "DeleteKeyPair", region):
            ec2.delete_key_pair(KeyName=orphan.id)
    elif orphan.kind == "security-group":
        with aws_call("ec2", "DeleteSecurityGroup", region):
            ec2.delete_security_group(GroupId=orphan.id)
    elif orphan.kind == "placement-group":
        with aws_call("ec2", "DeletePlacementGroup", region):
            ec2.delete_placement_group(GroupName=orphan.id)
