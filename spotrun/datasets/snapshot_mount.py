"""On the instance: find the data volume made from a snapshot and mount it read-only; find the
run's cache volume and mount it read-write (formatting it the first time) for the stager.

The controller attaches a snapshot's volume as /dev/sdf and a cache volume as /dev/sdg; on
Nitro instances each appears as an NVMe device whose serial is the volume id without its dash
(vol-0abc -> vol0abc), on older types as /dev/xvdf or /dev/xvdg. A snapshot's file system is
mounted read-only at /mnt/spotrun-data/SNAPSHOT_ID (the folder is the data set, or holds it in
`folder`); a cache volume at /mnt/spotrun-cache/VOLUME_ID.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from pathlib import Path

from spotrun.core.errors import DataError
from spotrun.core.rundir import DATA_VOLUME_VAR
from spotrun.core.waiting import poll_until
from spotrun.datasets.spec import SnapshotData

MOUNT_ROOT = Path("/mnt/spotrun-data")
CACHE_MOUNT_ROOT = Path("/mnt/spotrun-cache")
WAIT_S = 120.0
CACHE_WAIT_S = 60.0
LEGACY_DATA = (Path("/dev/xvdf"), Path("/dev/sdf"))
LEGACY_CACHE = (Path("/dev/xvdg"), Path("/dev/sdg"))


def device_for(
    volume_id: str,
    sys_block: Path = Path("/sys/block"),
    legacy: tuple[Path, ...] = LEGACY_DATA,
) -> Path | None:
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
    for name in legacy:
        if name.exists():
            return name
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
        volume_id = os.environ.get(DATA_VOLUME_VAR, "")
        if not volume_id:
            raise DataError(
                f"data {spec.uri}: no data volume was attached to this machine",
                hint="snapshot data needs --cloud aws (the controller attaches the volume)",
            )
        device = _wait_for_device(volume_id, sys_block, wait_s, LEGACY_DATA)
        if device is None:
            raise DataError(
                f"volume {volume_id} did not appear as a block device in {wait_s:.0f} s",
                hint="the attachment may have failed: see the run's events",
            )
        subprocess.run([*_sudo(), "mkdir", "-p", str(target)], capture_output=True)
        done = subprocess.run(
            [*_sudo(), "mount", "-o", "ro,noatime", str(device), str(target)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise DataError(
                f"cannot mount {device} (volume {volume_id}) at {target}: "
                f"{done.stderr.strip() or done.returncode}"
            )


def _sudo() -> list[str]:
    return [] if os.geteuid() == 0 else ["sudo", "-n"]  # images log in as a sudoer


def _wait_for_device(
    volume_id: str, sys_block: Path, wait_s: float, legacy: tuple[Path, ...]
) -> Path | None:
    found: list[Path] = []

    def attached() -> bool:
        device = device_for(volume_id, sys_block, legacy)
        found[:] = [device] if device is not None else []
        return device is not None

    poll_until(attached, timeout_s=wait_s, interval_s=1.0)
    return found[0] if found else None


def mounted_cache(
    volume_id: str,
    *,
    mount_root: Path = CACHE_MOUNT_ROOT,
    sys_block: Path = Path("/sys/block"),
    wait_s: float = CACHE_WAIT_S,
) -> Path:
    """Mount the run's cache volume read-write (once per machine; an ext4 file system made on
    it when it is blank) and return its mount point; a DataError when that cannot be done."""
    target = mount_root / volume_id
    with open(Path(tempfile.gettempdir()) / f"spotrun-mount-{volume_id}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_mounted(target, Path("/proc/mounts").read_text()):
            return target
        device = _wait_for_device(volume_id, sys_block, wait_s, LEGACY_CACHE)
        if device is None:
            raise DataError(f"cache volume {volume_id} did not appear in {wait_s:.0f} s")
        probe = subprocess.run(
            [*_sudo(), "blkid", "-o", "value", "-s", "TYPE", str(device)],
            capture_output=True,
            text=True,
        )
        if not probe.stdout.strip():  # blank: a new volume (blkid exits 2 with no answer)
            made = subprocess.run(
                [*_sudo(), "mkfs.ext4", "-q", "-F", "-m", "0", str(device)],
                capture_output=True,
                text=True,
            )
            if made.returncode != 0:
                raise DataError(f"cannot format cache volume {device}: {made.stderr.strip()}")
        subprocess.run([*_sudo(), "mkdir", "-p", str(target)], capture_output=True)
        done = subprocess.run(
            [*_sudo(), "mount", "-o", "rw,noatime", str(device), str(target)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise DataError(
                f"cannot mount cache volume {device} at {target}: "
                f"{done.stderr.strip() or done.returncode}"
            )
        if os.geteuid() != 0:  # the job's user stages into it
            subprocess.run(
                [*_sudo(), "chown", f"{os.getuid()}:{os.getgid()}", str(target)],
                capture_output=True,
            )
    return target
