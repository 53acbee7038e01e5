"""Where data is staged: the NVMe instance store when one is mounted, else the root volume."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotrun.core.rundir import STAGE_ROOT_VAR
from spotrun.datasets.roots import instance_store_mounts, stage_root

EBS_MODEL = "Amazon Elastic Block Store              \n"
STORE_MODEL = "Amazon EC2 NVMe Instance Storage        \n"


def _disk(sys_block: Path, name: str, model: str) -> None:
    (sys_block / name / "device").mkdir(parents=True)
    (sys_block / name / "device" / "model").write_text(model)


def test_instance_store_mounts_are_told_from_ebs_by_the_device_model(tmp_path: Path) -> None:
    _disk(tmp_path, "nvme0n1", EBS_MODEL)  # the root volume
    _disk(tmp_path, "nvme1n1", STORE_MODEL)
    _disk(tmp_path, "nvme2n1", STORE_MODEL)
    _disk(tmp_path, "nvme3n1", STORE_MODEL)
    (tmp_path / "md0" / "slaves").mkdir(parents=True)  # a RAID 0 of two instance store disks
    for member in ("nvme2n1", "nvme3n1"):
        (tmp_path / "md0" / "slaves" / member).mkdir()
    mounts = "\n".join(
        [
            "/dev/nvme0n1p1 / ext4 rw,relatime 0 0",
            "/dev/nvme1n1 /opt/dlami/nvme ext4 rw 0 0",
            "/dev/md0 /mnt/raid\\040store xfs rw 0 0",
            "tmpfs /tmp tmpfs rw 0 0",
            "/dev/nvme9n1 /mnt/unknown ext4 rw 0 0",
        ]
    )
    assert instance_store_mounts(mounts, tmp_path) == [
        Path("/opt/dlami/nvme"),
        Path("/mnt/raid store"),
    ]


def test_the_root_volume_without_an_instance_store_and_the_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STAGE_ROOT_VAR, raising=False)
    found = stage_root(tmp_path / "home")  # this machine has no instance store
    assert found.kind == "root volume" and found.path == tmp_path / "home" / "spotrun-data"
    monkeypatch.setenv(STAGE_ROOT_VAR, str(tmp_path / "fast"))
    assert stage_root(tmp_path / "home").path == tmp_path / "fast"
