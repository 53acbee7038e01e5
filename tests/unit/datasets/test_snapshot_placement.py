"""Snapshot data: copy it to the instance store or read it in place, decided from the instance
type's data as EC2 (moto's DescribeInstanceTypes) reports it; the copy itself on real files,
resumed after it was cut short."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotlab.lab import FAKE_CREDENTIALS, REGION, MotoServer
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.aws.volumes import type_storage
from spotrun.core.config import AwsSettings
from spotrun.datasets.placement import TypeStorage, snapshot_placement
from spotrun.datasets.snapshot_copy import copy_to_instance_store
from spotrun.datasets.spec import parse_snapshot
from tests.unit.train.data.images import make_image_folder


@pytest.fixture
def ec2_types(monkeypatch: pytest.MonkeyPatch) -> AwsClients:
    monkeypatch.setenv("AWS_ENDPOINT_URL", MotoServer.shared().url)
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    return AwsClients(AwsSettings(region=REGION))


def test_the_choice_follows_the_type_data(ec2_types: AwsClients) -> None:
    g5 = type_storage(ec2_types, REGION, "g5.xlarge")  # 250 GB NVMe, 16 GB memory
    c6i = type_storage(ec2_types, REGION, "c6i.large")  # no instance store
    assert g5 == TypeStorage("g5.xlarge", 250, 16.0, 437.5)
    assert c6i is not None and c6i.instance_store_gb == 0
    assert type_storage(ec2_types, REGION, "zz9.nonesuch") is None

    copy = snapshot_placement(150, g5)
    assert copy.action == "copy" and "250 GB instance store" in copy.reason
    cached = snapshot_placement(8, g5)  # fits in the page cache: one EBS read is enough
    assert cached.action == "mount" and "page cache" in cached.reason
    too_big = snapshot_placement(240, g5)  # 240 GB x 1.1 does not fit in 250 GB
    assert too_big.action == "mount" and "cannot hold" in too_big.reason
    assert snapshot_placement(150, c6i).reason == "c6i.large has no instance store"


def test_the_copy_resumes_and_is_done_once(tmp_path: Path) -> None:
    volume = make_image_folder(tmp_path / "volume" / "sets" / "pets", per_class=3, size=8).root
    (tmp_path / "volume" / "lost+found").mkdir()
    spec = parse_snapshot("snapshot:snap-0123456789abcdef0/sets/pets")
    store = tmp_path / "nvme"
    said: list[str] = []
    files = sorted(p.relative_to(volume).as_posix() for p in volume.rglob("*") if p.is_file())

    # A copy cut short: half the files there, one of them partial.
    dest = store / "spotrun-data" / "snap-0123456789abcdef0" / "sets/pets"
    for rel in files[: len(files) // 2]:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes((volume / rel).read_bytes())
    (dest / files[0]).write_bytes(b"cut")

    got = copy_to_instance_store(volume, spec, said.append, store_root=store)
    assert got == dest
    assert {p: (got / p).read_bytes() for p in files} == {
        p: (volume / p).read_bytes() for p in files
    }
    assert f"({len(files) // 2 - 1:,} already there)" in said[0], said
    assert not list(got.rglob("*.part"))

    said.clear()
    (volume / files[1]).unlink()  # done once: the marker is trusted, the volume not read again
    assert copy_to_instance_store(volume, spec, said.append, store_root=store) == dest
    assert said == [] and (dest / files[1]).exists()
