"""The controller's side of snapshot data: a volume for the job, and its cost in the ledger.

Before the job starts, a run whose data is `snapshot:snap-...` gets a volume made from the
snapshot in its instance's zone and attached to it (the provider does the EC2 calls; only AWS
can). The job finds it by the id in SPOTRUN_DATA_VOLUME and mounts it read-only
(spotrun.datasets.snapshot_mount). The volume is listed in the instance's ledger record
(`details["volumes"]`, with when it was made and deleted), which is how the cost engine prices
EBS storage; the provider deletes it with the run's other resources.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from spotrun.cloud.base import Instance, Provider
from spotrun.cloud.by_name import s3_store
from spotrun.cloud.capabilities import AttachesDataVolumes
from spotrun.control.cache_zone import CACHE_ROLE
from spotrun.core.config import Settings
from spotrun.core.errors import SpotrunError, UsageError
from spotrun.core.rundir import CACHE_VOLUME_VAR, DATA_COPY_VAR, DATA_VOLUME_VAR
from spotrun.datasets.manifest import BLOCK_BYTES, MANIFEST_NAME, read_manifest
from spotrun.datasets.placement import snapshot_placement
from spotrun.datasets.spec import S3Data, SnapshotData, is_remote, parse_data
from spotrun.recipes import get_recipe
from spotrun.store.ledger import InstanceRecord, Ledger, RunRecord

DATA_ROLE = "data"
VOLUME_ROLES = (DATA_ROLE, CACHE_ROLE)
# A cache volume's size over the data set's: file system overhead, and the stager's reserve.
CACHE_HEADROOM = 1.10
CACHE_RESERVE_GB = 2


def run_data(run: RunRecord) -> str | None:
    """The run's `data` value when it names remote data (s3://, snapshot:), else None."""
    if run.spec.job is not None:  # your own command: a task file's `data`
        data = run.spec.job.data
        return data if data is not None and is_remote(data) else None
    try:
        recipe = get_recipe(run.spec.recipe, run.spec.overrides, data_here=False)
    except SpotrunError:
        return None  # the launch checked it; a recipe changed since is the job's to report
    return recipe.data if is_remote(recipe.data) else None


def attach_snapshot_data(
    provider: Provider, ledger: Ledger, run: RunRecord, instance: Instance
) -> dict[str, str]:
    """Attach the run's snapshot data to `instance`; the job's environment for it ({} if the
    run has no snapshot data)."""
    data = run_data(run)
    if data is None:
        return {}
    spec = parse_data(data)
    if not isinstance(spec, SnapshotData):
        return {}
    if not isinstance(provider, AttachesDataVolumes):
        raise UsageError(
            f"data {spec.uri} is an EBS snapshot: the {provider.name} cloud cannot attach it",
            hint="launch with --cloud aws",
        )
    volume = provider.attach_snapshot(instance, spec.snapshot_id)
    _record_volume(ledger, run, instance, volume.id, volume.size_gb, volume.created_at)
    ledger.add_event(
        run.id,
        "data",
        f"volume {volume.id} ({volume.size_gb} GB) made from {spec.snapshot_id} in "
        f"{volume.zone}, attached to {instance.id}",
    )
    env = {DATA_VOLUME_VAR: volume.id}
    storage = provider.instance_storage(instance)
    if storage is not None:
        placed = snapshot_placement(volume.size_gb, storage)
        what = "copied to the instance store" if placed.action == "copy" else "read in place"
        ledger.add_event(run.id, "data", f"{spec.uri} will be {what}: {placed.reason}")
        if placed.action == "copy":
            env[DATA_COPY_VAR] = "1"
    return env


def attach_data_cache(
    provider: Provider, ledger: Ledger, run: RunRecord, instance: Instance
) -> dict[str, str]:
    """When the provider caches data (`[aws] data_cache_volume`): the run's cache volume for
    its s3:// data attached to `instance` (the one an earlier instance in this zone staged
    onto, or a new one sized for the data set); the job's environment for it ({} when the
    run has none)."""
    data = run_data(run)
    if data is None or not isinstance(provider, AttachesDataVolumes) or not provider.caches_data:
        return {}
    spec = parse_data(data)
    if not isinstance(spec, S3Data):
        return {}
    size_gb = cache_size_gb(data_set_disk_bytes(spec))
    found = provider.attach_cache_volume(instance, size_gb)
    volume = found.volume
    for other in found.deleted:
        _close_volume(ledger, run, other, time.time())
    _record_volume(ledger, run, instance, volume.id, volume.size_gb, volume.created_at, CACHE_ROLE)
    reused = " (reused: its staged shards are kept)" if found.reused else ""
    if found.deleted and not found.reused:
        reused = (
            f" (new: {', '.join(found.deleted)} in another zone was deleted; the data set is "
            "staged again)"
        )
    ledger.add_event(
        run.id,
        "data",
        f"cache volume {volume.id} ({volume.size_gb} GB) in {volume.zone} attached to "
        f"{instance.id} for {spec.uri}{reused}",
    )
    return {CACHE_VOLUME_VAR: volume.id}


def cache_size_gb(disk_bytes: int) -> int:
    return int(-(-disk_bytes * CACHE_HEADROOM // (1 << 30))) + CACHE_RESERVE_GB


def data_set_disk_bytes(spec: S3Data) -> int:
    """What the data set takes on disk once staged (its manifest's count, or the listing's)."""
    store = s3_store(spec.bucket)
    raw = store.read(spec.key(MANIFEST_NAME))
    if raw is not None:
        return read_manifest(raw, f"{spec.uri}/{MANIFEST_NAME}").disk_bytes
    return sum(o.size + BLOCK_BYTES for o in store.list(spec.list_prefix))


def _root_volume(run: RunRecord, settings: Settings) -> dict[str, Any]:
    return {"size_gb": run.spec.resources.disk_gb or settings.run.root_volume_gb, "type": "gp3"}


def _record_volume(
    ledger: Ledger,
    run: RunRecord,
    instance: Instance,
    volume_id: str,
    size_gb: int,
    created_at: float,
    role: str = DATA_ROLE,
) -> None:
    record = _instance_record(ledger, run.id, instance.id)
    if record is None:
        return
    now = time.time()
    for other in ledger.instances(run.id):  # a volume reused by a replacement instance:
        if other.id == instance.id:  # its charge moves over, never counted twice
            continue
        listed = other.details.get("volumes") or []
        if any(v.get("id") == volume_id and v.get("deleted_at") is None for v in listed):
            moved = [
                {**v, "deleted_at": now}
                if v.get("id") == volume_id and v.get("deleted_at") is None
                else v
                for v in listed
            ]
            _save_details(ledger, other, {**other.details, "volumes": moved})
            created_at = now
    listed = list(record.details.get("volumes") or [_root_volume(run, ledger.settings)])
    if any(v.get("id") == volume_id for v in listed):
        return
    listed.append(
        {
            "id": volume_id,
            "role": role,
            "size_gb": size_gb,
            "type": "gp3",
            "created_at": created_at,
        }
    )
    _save_details(ledger, record, {**record.details, "volumes": listed})


def mark_data_volumes_deleted(ledger: Ledger, run: RunRecord, at: float | None = None) -> None:
    """After teardown: the run's data volumes are gone; their storage is billed up to now."""
    at = at if at is not None else time.time()
    for record in ledger.instances(run.id):
        listed = record.details.get("volumes") or []
        if not any(v.get("role") in VOLUME_ROLES and v.get("deleted_at") is None for v in listed):
            continue
        updated = [
            {**v, "deleted_at": at}
            if v.get("role") in VOLUME_ROLES and v.get("deleted_at") is None
            else v
            for v in listed
        ]
        _save_details(ledger, record, {**record.details, "volumes": updated})


def _close_volume(ledger: Ledger, run: RunRecord, volume_id: str, at: float) -> None:
    """A volume deleted while the run goes on (a cache volume left in another zone)."""
    for record in ledger.instances(run.id):
        listed = record.details.get("volumes") or []
        if any(v.get("id") == volume_id and v.get("deleted_at") is None for v in listed):
            closed = [
                {**v, "deleted_at": at}
                if v.get("id") == volume_id and v.get("deleted_at") is None
                else v
                for v in listed
            ]
            _save_details(ledger, record, {**record.details, "volumes": closed})


def _instance_record(ledger: Ledger, run_id: str, instance_id: str) -> InstanceRecord | None:
    return next((r for r in ledger.instances(run_id) if r.id == instance_id), None)


def _save_details(ledger: Ledger, record: InstanceRecord, details: dict[str, Any]) -> None:
    ledger.upsert_instance(replace(record, details=details))
