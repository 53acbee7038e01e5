"""EBS volumes for a run's data: one made from a data set's snapshot (role `data`), or a blank
cache volume S3 data is staged onto (role `data-cache`, `[aws] data_cache_volume`), so that a
replacement instance in the same zone attaches it and fetches only the shards it lacks. Both
are created in the instance's zone, attached, and deleted when the run ends.

A volume carries the run's tags (spotrun:run-id, owner, expires: spotrun.cloud.aws.network)
plus spotrun:role, so `spotrun gc` finds one a crash left behind, and the cost engine
prices it as EBS storage for as long as it existed. A snapshot id names a snapshot in one
region only: one asked for in another region is found there and named in the error.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from spotrun.cloud.aws.errors import aws_call, error_code
from spotrun.cloud.aws.network import TAG_RUN
from spotrun.cloud.aws.session import AwsClients
from spotrun.core.config import Settings
from spotrun.core.errors import CloudError, UsageError
from spotrun.core.waiting import WaitTimeout, wait_until
from spotrun.datasets.placement import TypeStorage

TAG_ROLE = "spotrun:role"
DATA_ROLE = "data"
CACHE_ROLE = "data-cache"
# The device names asked for; Nitro instances show them as NVMe devices whose serial is the
# volume id (vol-0123... -> vol0123...), which is how the instance finds them.
DEVICE_NAME = "/dev/sdf"
CACHE_DEVICE_NAME = "/dev/sdg"
VOLUME_TYPE = "gp3"


@dataclass(frozen=True)
class Snapshot:
    id: str
    region: str
    size_gb: int
    state: str


@dataclass(frozen=True)
class DataVolume:
    id: str
    zone: str
    size_gb: int
    state: str
    attached_to: str | None
    created_at: float
    role: str = DATA_ROLE


def _ec2(clients: AwsClients, region: str, attempts: int | None = None) -> Any:
    return clients.client("ec2", region, attempts=attempts)


def find_snapshot(
    clients: AwsClients, region: str, snapshot_id: str, attempts: int | None = None
) -> Snapshot | None:
    try:
        answer = _ec2(clients, region, attempts).describe_snapshots(SnapshotIds=[snapshot_id])
    except ClientError as exc:
        if error_code(exc).startswith("InvalidSnapshot"):
            return None
        with aws_call("ec2", "DescribeSnapshots", region):
            raise
    items = answer.get("Snapshots", [])
    if not items:
        return None
    item = items[0]
    return Snapshot(item["SnapshotId"], region, int(item["VolumeSize"]), str(item["State"]))


def snapshot_in(clients: AwsClients, region: str, snapshot_id: str) -> Snapshot:
    """The snapshot in `region`; a UsageError naming the region it is in when it is elsewhere."""
    found = find_snapshot(clients, region, snapshot_id)
    if found is not None:
        if found.state == "error":
            raise UsageError(f"snapshot {snapshot_id} is in the error state and cannot be used")
        return found
    hits = _search_other_regions(clients, region, snapshot_id)
    if hits:
        raise UsageError(
            f"snapshot {snapshot_id} is in {hits[0].region}, not in {region} where the run "
            "would launch",
            hint=f"launch in {hits[0].region} (--region {hits[0].region}), or copy the snapshot "
            f"to {region} (aws ec2 copy-snapshot)",
        )
    raise UsageError(
        f"snapshot {snapshot_id} does not exist in {region} (nor in any other region these "
        "credentials can see)",
        hint="check the id: aws ec2 describe-snapshots --owner-ids self",
    )


def _search_other_regions(clients: AwsClients, region: str, snapshot_id: str) -> list[Snapshot]:
    """The snapshot in another region of the account: the regions of the same geography
    (us-, eu-...) first, then the rest a batch at a time, stopping once it is found."""
    geo = region.split("-")[0]
    partition = _partition(region)
    others = [
        r for r in enabled_regions(clients, region) if r != region and _partition(r) == partition
    ]
    near = [r for r in others if r.split("-")[0] == geo]
    far = [r for r in others if r.split("-")[0] != geo]
    batches = [near] + [far[i : i + 8] for i in range(0, len(far), 8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for batch in batches:
            found = [
                s
                for s in pool.map(lambda r: _quiet_find(clients, r, snapshot_id), batch)
                if s is not None
            ]
            if found:
                return found
    return []


def _partition(region: str) -> str:
    """Regions of one partition share credentials; a snapshot is never found across them."""
    if region.startswith("cn-"):
        return "aws-cn"
    return "aws-us-gov" if region.startswith("us-gov-") else "aws"


def enabled_regions(clients: AwsClients, region: str) -> list[str]:
    """The regions this account has enabled (where its snapshots can be)."""
    with aws_call("ec2", "DescribeRegions", region):
        answer = _ec2(clients, region).describe_regions()
    return sorted(r["RegionName"] for r in answer.get("Regions", []))


def _quiet_find(clients: AwsClients, region: str, snapshot_id: str) -> Snapshot | None:
    try:
        return find_snapshot(clients, region, snapshot_id, attempts=2)
    except (CloudError, UsageError):
        return None  # a region these credentials may not use


def type_storage(clients: AwsClients, region: str, instance_type: str) -> TypeStorage | None:
    """The type's instance store, memory and EBS ceiling (None if EC2 does not know it)."""
    try:
        answer = _ec2(clients, region).describe_instance_types(InstanceTypes=[instance_type])
    except ClientError as exc:
        if error_code(exc) == "InvalidInstanceType":
            return None
        with aws_call("ec2", "DescribeInstanceTypes", region):
            raise
    items = answer.get("InstanceTypes", [])
    return TypeStorage.from_api(items[0]) if items else None


def snapshot_of(snapshot_id: str, region: str | None, settings: Settings) -> Snapshot:
    """The snapshot in `region` (default aws.region); NotFound-like errors name it."""
    return snapshot_in(AwsClients(settings.aws), region or settings.aws.region, snapshot_id)


@dataclass(frozen=True)
class CacheAttachment:
    volume: DataVolume
    reused: bool  # an earlier instance's volume: the shards staged on it are kept
    deleted: list[str]  # the run's cache volumes in other zones, deleted


def _volume(item: dict[str, Any]) -> DataVolume:
    attachments = [a for a in item.get("Attachments", []) if a.get("State") != "detached"]
    created = item.get("CreateTime")
    tags = {t["Key"]: t["Value"] for t in item.get("Tags", [])}
    return DataVolume(
        item["VolumeId"],
        item["AvailabilityZone"],
        int(item["Size"]),
        str(item["State"]),
        attachments[0]["InstanceId"] if attachments else None,
        created.timestamp() if created is not None else time.time(),
        tags.get(TAG_ROLE, DATA_ROLE),
    )


def run_volumes(
    clients: AwsClients, region: str, run_id: str, roles: tuple[str, ...] = (DATA_ROLE, CACHE_ROLE)
) -> list[DataVolume]:
    """The run's data volumes (of these roles) that still exist."""
    with aws_call("ec2", "DescribeVolumes", region):
        answer = _ec2(clients, region).describe_volumes(
            Filters=[
                {"Name": f"tag:{TAG_RUN}", "Values": [run_id]},
                {"Name": f"tag:{TAG_ROLE}", "Values": list(roles)},
            ]
        )
    return [
        _volume(v) for v in answer.get("Volumes", []) if v["State"] not in ("deleting", "deleted")
    ]


def ensure_volume(
    clients: AwsClients,
    region: str,
    zone: str,
    snapshot: Snapshot,
    tags: list[dict[str, str]],
    run_id: str,
) -> DataVolume:
    """The run's data volume in `zone`, made from the snapshot unless one is already there."""
    for volume in run_volumes(clients, region, run_id, (DATA_ROLE,)):
        if volume.zone == zone:
            return volume
    all_tags = [*tags, {"Key": TAG_ROLE, "Value": DATA_ROLE}]
    with aws_call("ec2", "CreateVolume", region):
        item = _ec2(clients, region).create_volume(
            SnapshotId=snapshot.id,
            AvailabilityZone=zone,
            VolumeType=VOLUME_TYPE,
            TagSpecifications=[{"ResourceType": "volume", "Tags": all_tags}],
        )
    return _volume(item)


def ensure_cache_volume(
    clients: AwsClients,
    region: str,
    zone: str,
    size_gb: int,
    tags: list[dict[str, str]],
    run_id: str,
) -> CacheAttachment:
    """The run's cache volume in `zone` (what an earlier instance staged is on it), made blank
    unless one is there; cache volumes in other zones are deleted, since no instance here can
    attach them (the shards on them are fetched again)."""
    found = run_volumes(clients, region, run_id, (CACHE_ROLE,))
    elsewhere = [v for v in found if v.zone != zone and v.attached_to is None]
    gone = _delete_ids(clients, region, [v.id for v in elsewhere])
    for volume in found:
        if volume.zone == zone:
            return CacheAttachment(volume, True, gone)
    all_tags = [*tags, {"Key": TAG_ROLE, "Value": CACHE_ROLE}]
    with aws_call("ec2", "CreateVolume", region):
        item = _ec2(clients, region).create_volume(
            Size=max(1, size_gb),
            AvailabilityZone=zone,
            VolumeType=VOLUME_TYPE,
            TagSpecifications=[{"ResourceType": "volume", "Tags": all_tags}],
        )
    return CacheAttachment(_volume(item), False, gone)


def _delete_ids(clients: AwsClients, region: str, ids: list[str]) -> list[str]:
    deleted = []
    for volume_id in ids:
        with aws_call("ec2", "DeleteVolume", region):
            try:
                _ec2(clients, region).delete_volume(VolumeId=volume_id)
            except ClientError as exc:
                if error_code(exc) != "InvalidVolume.NotFound":
                    raise
        deleted.append(volume_id)
    return deleted


def _state(clients: AwsClients, region: str, volume_id: str) -> dict[str, Any] | None:
    try:
        answer = _ec2(clients, region).describe_volumes(VolumeIds=[volume_id])
    except ClientError as exc:
        if error_code(exc) == "InvalidVolume.NotFound":
            return None
        with aws_call("ec2", "DescribeVolumes", region):
            raise
    items = answer.get("Volumes", [])
    return items[0] if items else None


def attach(
    clients: AwsClients,
    region: str,
    volume: DataVolume,
    instance_id: str,
    wait_s: float,
    device: str = DEVICE_NAME,
) -> DataVolume:
    """Attach the volume to the instance (once it is available); returns it attached."""
    if volume.attached_to == instance_id:
        return volume
    ready = lambda: (_state(clients, region, volume.id) or {}).get("State") == "available"  # noqa: E731
    try:
        wait_until(ready, timeout_s=wait_s, what=f"volume {volume.id} to be available")
    except WaitTimeout as exc:
        raise CloudError(f"volume {volume.id} did not become available in {wait_s:.0f} s") from exc
    with aws_call("ec2", "AttachVolume", region):
        _ec2(clients, region).attach_volume(
            VolumeId=volume.id, InstanceId=instance_id, Device=device
        )
    item = _state(clients, region, volume.id)
    if item is None:
        raise CloudError(f"volume {volume.id} vanished while being attached")
    return _volume(item)


def delete_run_volumes(clients: AwsClients, region: str, run_id: str, wait_s: float) -> list[str]:
    """Detach and delete the run's data volumes; the ids deleted."""
    ec2 = _ec2(clients, region)
    deleted = []
    for volume in run_volumes(clients, region, run_id):
        if volume.attached_to is not None:
            with aws_call("ec2", "DetachVolume", region):
                try:
                    ec2.detach_volume(VolumeId=volume.id, Force=True)
                except ClientError as exc:
                    if error_code(exc) != "IncorrectState":
                        raise
            gone = lambda v=volume.id: (_state(clients, region, v) or {}).get("State") != "in-use"  # noqa: E731
            try:
                wait_until(gone, timeout_s=wait_s, what=f"{volume.id} to detach")
            except WaitTimeout:
                continue  # gc will find it by its tags
        with aws_call("ec2", "DeleteVolume", region):
            try:
                ec2.delete_volume(VolumeId=volume.id)
            except ClientError as exc:
                if error_code(exc) != "InvalidVolume.NotFound":
                    raise
        deleted.append(volume.id)
    return deleted
