"""On the instance: find the data volume made from a snapshot and mount it read-only.

The controller attaches the volume as /dev/sdf; on Nitro instances it appears as an NVMe
device whose serial is the volume id without its dash (vol-0abc -> vol0abc), on older types
as /dev/xvdf. The volume's file system is mounted read-only at /mnt/spotrun-data/SNAPSHOT_ID
(the folder is the data set, or holds it in `folder`).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
import time
from pathlib import Path

from spotrun.datasets.spec import SnapshotData
from spotrun.errors import DataError

MOUNT_ROOT = Path("/mnt/spotrun-data")
VOLUME_ENV = "SPOTRUN_DATA_VOLUME"  # the volume id, set by the controller in the job's env
WAIT_S = 120.0


def device_for(volume_id: str, sys_block: Path = Path("/sys/block")) -> Path | None:
    """The block device of an attached EBS volume: by its NVMe serial, else the xvdf name."""
    serial = volume_id.replace("-", "")
    if sys_block.is_dir():
        for disk in sorted(sys_block.iterdir()):
            try:
                found = (disk / "device" / "serial").read_text().strip()
            except OSError:
                continue
            if found == serial:
                return Path("/dev") / disk.name
    for legacy in (Path("/dev/xvdf"), Path("/dev/sdf")):
        if legacy.exists():
            return legacy
    return None


def is_mounted(target: Path, mounts_text: str) -> bool:
    return any(
        len(f := line.split()) >= 2 and f[1] == str(target) for line in mounts_text.splitlines()
    )


def mounted_path(
    spec: SnapshotData,
    *,
    mount_root: Path = MOUNT_ROOT,
    sys_block: Path = Path("/sys/block"),
    wait_s: float = WAIT_S,
) -> Path:
    """Mount the run's data volume (once) and return the data set's folder in it."""
    target = mount_root / spec.snapshot_id
    # one mount per machine, whichever torchrun rank comes first
    with open(Path(tempfile.gettempdir()) / f"spotrun-mount-{spec.snapshot_id}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _mount_once(target, sys_block, wait_s, spec)
    path = target / spec.folder if spec.folder else target
    if not path.is_dir():
        raise DataError(f"data {spec.uri}: {spec.folder or '/'} is not a folder on the snapshot")
    return path


def _mount_once(target: Path, sys_block: Path, wait_s: float, spec: SnapshotData) -> None:
    mounts = Path("/proc/mounts").read_text()
    if not is_mounted(target, mounts):
        volume_id = os.environ.get(VOLUME_ENV, "")
        if not volume_id:
            raise DataError(
                f"data {spec.uri}: no data volume was attached to this machine",
                hint="snapshot data needs --cloud aws (the controller attaches the volume)",
            )
        deadline = time.monotonic() + wait_s
        device = device_for(volume_id, sys_block)
        while device is None and time.monotonic() < deadline:
            time.sleep(1.0)
            device = device_for(volume_id, sys_block)
        if device is None:
            raise DataError(
                f"volume {volume_id} did not appear as a block device in {wait_s:.0f} s",
                hint="the attachment may have failed: see the run's events",
            )
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]  # images log in as a sudoer
        subprocess.run([*sudo, "mkdir", "-p", str(target)], capture_output=True)
        done = subprocess.run(
            [*sudo, "mount", "-o", "ro,noatime", str(device), str(target)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise DataError(
                f"cannot mount {device} (volume {volume_id}) at {target}: "
                f"{done.stderr.strip() or done.returncode}"
            )
