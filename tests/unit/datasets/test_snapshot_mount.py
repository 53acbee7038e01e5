"""The instance's side of snapshot data: find the attached volume by its NVMe serial, mount it
read-only, hand the trainer its folder. A real ext4 file system on a real loop device, mounted
in a mount namespace of its own (as root, as CI runs); /sys/block is the only thing made up,
since a loop device has no NVMe serial."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spotrun.datasets.snapshot_mount import device_for, is_mounted
from tests.unit.train.data.images import make_image_folder

VOLUME = "vol-0123456789abcdef0"


def _can_mount() -> bool:
    return (
        os.geteuid() == 0
        and Path("/dev/loop-control").exists()
        and all(shutil.which(t) for t in ("mkfs.ext4", "losetup", "unshare", "mount"))
    )


def test_device_for_finds_the_volume_by_its_nvme_serial(tmp_path: Path) -> None:
    for disk, serial in (
        ("nvme0n1", "vol0aaaaaaaaaaaaaaaaa"),
        ("nvme1n1", VOLUME.replace("-", "")),
    ):
        (tmp_path / disk / "device").mkdir(parents=True)
        (tmp_path / disk / "device" / "serial").write_text(serial + "\n")
    assert device_for(VOLUME, tmp_path) == Path("/dev/nvme1n1")
    mounts = "/dev/nvme1n1 /mnt/spotrun-data/snap-1 ext4 ro,noatime 0 0\n"
    assert is_mounted(Path("/mnt/spotrun-data/snap-1"), mounts)
    assert not is_mounted(Path("/mnt/spotrun-data/snap-2"), mounts)


@pytest.mark.skipif(not _can_mount(), reason="needs root, loop devices, mkfs.ext4 and unshare")
def test_the_snapshot_volume_is_mounted_read_only_and_trainable(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "set" / "pets", per_class=2, size=8).root
    image = tmp_path / "volume.img"
    with open(image, "wb") as fh:
        fh.truncate(16 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(tmp_path / "set"), str(image)], check=True)
    script = textwrap.dedent(
        f"""
        import os, subprocess, sys
        from pathlib import Path
        from spotrun.datasets.snapshot_mount import mounted_path
        from spotrun.datasets.spec import parse_data
        from spotrun.train.data.source import resolve_data
        loop = subprocess.run(["losetup", "--find", "--show", {str(image)!r}],
                              capture_output=True, text=True, check=True).stdout.strip()
        try:
            sys_block = Path({str(tmp_path / "sys")!r})
            (sys_block / Path(loop).name / "device").mkdir(parents=True)
            (sys_block / Path(loop).name / "device" / "serial").write_text({VOLUME.replace("-", "")!r})
            os.environ["SPOTRUN_DATA_VOLUME"] = {VOLUME!r}
            spec = parse_data("snapshot:snap-0123456789abcdef0/pets")
            root = Path({str(tmp_path / "mnt")!r})
            path = mounted_path(spec, mount_root=root, sys_block=sys_block, wait_s=1)
            again = mounted_path(spec, mount_root=root, sys_block=sys_block, wait_s=1)
            print("path", path, again == path)
            print("kind", resolve_data(str(path), Path("/nonexistent")).kind)
            print("files", sorted(p.relative_to(path).as_posix() for p in path.rglob("*.png")))
            try:
                (path / "new").write_text("x")
            except OSError as exc:
                print("write", exc.errno)
            subprocess.run(["umount", str(root / "snap-0123456789abcdef0")], check=True)
        finally:
            subprocess.run(["losetup", "-d", loop], check=True)
        """
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["path"] == f"{tmp_path / 'mnt'}/snap-0123456789abcdef0/pets True"
    assert lines["kind"] == "image-folder"
    expected = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.png"))
    assert lines["files"] == repr(expected)
    assert lines["write"] == "30"  # EROFS: mounted read-only
