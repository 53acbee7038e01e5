"""Where on this machine a data set is staged: the NVMe instance store when there is one.

EC2 instance store volumes are NVMe devices whose model reads "Amazon EC2 NVMe Instance
Storage" (EBS volumes read "Amazon Elastic Block Store"); several are often joined in one md
RAID 0. The image (or provisioning) formats and mounts them; here we only find the mounted one
with the most free space. Without one, data goes to the root volume under SPOTRUN_HOME. The
run's cache volume (SPOTRUN_CACHE_VOLUME, `[aws] data_cache_volume`) wins over both, so a
replacement instance reattaching it finds what was staged; SPOTRUN_STAGE_ROOT overrides all.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spotrun.core.errors import DataError
from spotrun.core.rundir import CACHE_VOLUME_VAR, STAGE_ROOT_VAR
from spotrun.datasets.snapshot_mount import mounted_cache

INSTANCE_STORE_MODEL = "Instance Storage"
STAGED_FOLDER = "spotrun-data"


@dataclass(frozen=True)
class StageRoot:
    path: Path
    kind: str  # "instance store", "root volume" or "SPOTRUN_STAGE_ROOT"


def _unescape(field: str) -> str:
    """/proc/mounts writes spaces and tabs in paths as octal escapes."""
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")


def _is_instance_store(device: str, sys_block: Path) -> bool:
    name = Path(device).name
    if name.startswith("md"):  # a RAID of instance store disks
        slaves = sys_block / name / "slaves"
        members = [p.name for p in slaves.iterdir()] if slaves.is_dir() else []
        return bool(members) and all(_is_instance_store(m, sys_block) for m in members)
    disk = name.split("p")[0] if name.startswith("nvme") else name  # nvme1n1p1 -> nvme1n1
    try:
        model = (sys_block / disk / "device" / "model").read_text()
    except OSError:
        return False
    return INSTANCE_STORE_MODEL in model


def instance_store_mounts(mounts_text: str, sys_block: Path = Path("/sys/block")) -> list[Path]:
    """Mount points of instance store volumes in `mounts_text` (/proc/mounts)."""
    found = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 3 or not fields[0].startswith("/dev/"):
            continue
        if _is_instance_store(fields[0], sys_block):
            found.append(Path(_unescape(fields[1])))
    return found


def stage_root(home: Path, log: Callable[[str], None] | None = None) -> StageRoot:
    override = os.environ.get(STAGE_ROOT_VAR)
    if override:
        return StageRoot(Path(override).expanduser(), STAGE_ROOT_VAR)
    cache = os.environ.get(CACHE_VOLUME_VAR)
    if cache:  # the run's cache volume: a replacement instance finds the shards staged on it
        try:
            return StageRoot(mounted_cache(cache) / STAGED_FOLDER, f"cache volume {cache}")
        except DataError as exc:  # a cache only saves time: stage without it
            if log is not None:
                log(f"{exc.message}; staging without it (a replacement fetches everything)")
    try:
        mounts = instance_store_mounts(Path("/proc/mounts").read_text())
    except OSError:
        mounts = []
    writable = [m for m in mounts if os.access(m, os.W_OK)]
    if writable:
        best = max(writable, key=lambda m: shutil.disk_usage(m).free)
        return StageRoot(best / STAGED_FOLDER, "instance store")
    return StageRoot(home / STAGED_FOLDER, "root volume")
