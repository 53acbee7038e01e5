"""Snapshot data: read it where the volume is mounted, or copy it to the NVMe instance store
first. Decided from the instance type's own data (DescribeInstanceTypes), before the job runs.

A volume made from a snapshot reads at most its gp3 baseline (125 MB/s) or the type's EBS
bandwidth, whichever is lower (and slower still the first time each block is read, while EBS
fetches it from S3). A set that fits in half the instance's memory is read from EBS once: the
page cache serves every later epoch, so a copy would only add a full read. A larger set is
read from EBS every epoch; one copy to the instance store costs about one such read, and
every later epoch then reads NVMe at GB/s. So: copy when the set does not fit in half the
memory and the instance store holds it with room to spare; otherwise mount read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

GP3_BASELINE_MBPS = 125.0  # what a gp3 volume reads without provisioned throughput
STORE_HEADROOM = 1.1  # the instance store must hold the set and a tenth more
CACHED_FRACTION = 0.5  # a set up to this share of memory stays in the page cache


@dataclass(frozen=True)
class TypeStorage:
    """What an instance type offers for data (from DescribeInstanceTypes)."""

    instance_type: str
    instance_store_gb: int  # 0: none
    memory_gb: float
    ebs_max_mbps: float | None  # the type's EBS throughput ceiling, MB/s

    @classmethod
    def from_api(cls, item: dict[str, Any]) -> TypeStorage:
        store = item.get("InstanceStorageInfo") or {}
        memory = item.get("MemoryInfo") or {}
        ebs = (item.get("EbsInfo") or {}).get("EbsOptimizedInfo") or {}
        top = ebs.get("MaximumThroughputInMBps")
        return cls(
            str(item["InstanceType"]),
            int(store.get("TotalSizeInGB") or 0),
            float(memory.get("SizeInMiB") or 0) / 1024,
            float(top) if top is not None else None,
        )


@dataclass(frozen=True)
class Placement:
    action: Literal["copy", "mount"]
    reason: str


def snapshot_placement(volume_gb: int, storage: TypeStorage) -> Placement:
    """Copy the snapshot's data to the instance store, or read it from the mounted volume."""
    t = storage.instance_type
    ebs = min(GP3_BASELINE_MBPS, storage.ebs_max_mbps or GP3_BASELINE_MBPS)
    if storage.memory_gb * CACHED_FRACTION >= volume_gb:
        return Placement(
            "mount",
            f"{volume_gb} GB fits in the page cache of {t} ({storage.memory_gb:.0f} GB of "
            "memory): read from EBS once",
        )
    if storage.instance_store_gb == 0:
        return Placement("mount", f"{t} has no instance store")
    if storage.instance_store_gb < volume_gb * STORE_HEADROOM:
        return Placement(
            "mount",
            f"{t}'s instance store ({storage.instance_store_gb} GB) cannot hold {volume_gb} GB",
        )
    return Placement(
        "copy",
        f"{volume_gb} GB does not fit in {t}'s page cache: one copy at ~{ebs:.0f} MB/s to its "
        f"{storage.instance_store_gb} GB instance store, then every epoch reads NVMe instead "
        "of EBS",
    )
