"""The instance's side of a cache volume: the first instance formats the blank volume, mounts it
and stages onto it until it is killed; the replacement mounts the same volume (no new file
system), finds the shards already complete on it and fetches only the rest. A real ext4 file
system on a real loop device, mounted in mount namespaces of their own (root, as CI runs), the
shards from moto's S3; /sys/block is the only thing made up (a loop device has no NVMe serial).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from spotrun.cloud.aws.datasets import S3Store
from spotrun.datasets.push import push
from spotrun.datasets.spec import parse_s3
from tests.unit.datasets.test_snapshot_mount import _can_mount
from tests.unit.train.data.images import make_image_folder

VOLUME = "vol-0fedcba9876543210"
REPO = Path(__file__).resolve().parents[2]

# One instance's life: attach (the loop device), mount the cache volume, stage; with DIE_AFTER
# shards fetched, the process dies mid-staging as an interrupted instance does.
INSTANCE = """
import json, os, subprocess, sys
from pathlib import Path
from spotrun.cloud.aws.datasets import S3Store
from spotrun.datasets.snapshot_mount import mounted_cache
from spotrun.datasets.spec import parse_s3
from spotrun.datasets.stager import StageOptions, stage

image, sys_dir, mnt, uri, volume = sys.argv[1:6]
die_after = int(sys.argv[6])
loop = subprocess.run(["losetup", "--find", "--show", image], capture_output=True, text=True,
                      check=True).stdout.strip()
try:
    serial = Path(sys_dir) / Path(loop).name / "device" / "serial"
    serial.parent.mkdir(parents=True, exist_ok=True)
    serial.write_text(volume.replace("-", ""))
    root = mounted_cache(volume, mount_root=Path(mnt), sys_block=Path(sys_dir), wait_s=1)
    print("existing", json.dumps(sorted(p.name for p in root.iterdir())), flush=True)
    source = parse_s3(uri)
    store = S3Store(source.bucket)
    fetched = []

    class Store:
        def __getattr__(self, name):
            return getattr(store, name)

        def stream(self, key, start, end):
            if die_after and len(fetched) >= die_after:
                os._exit(9)  # the instance is gone: no cleanup, no marker for this shard
            fetched.append(key)
            return store.stream(key, start, end)

    options = StageOptions(streams=1, reserve_bytes=0, log_every_s=0.0)
    result = stage(Store(), source, root / "spotrun-data", options, log=lambda line: None)
    print("result", json.dumps({"fetched": len(fetched), "skipped": result.status.items_skipped}),
          flush=True)
    files = {p.relative_to(result.dest).as_posix(): p.read_bytes().hex()
             for p in sorted(result.dest.rglob("*"))
             if p.is_file() and ".spotrun-stage" not in p.parts}
    print("files", json.dumps(files), flush=True)
finally:
    subprocess.run(["umount", "-l", str(Path(mnt) / volume)], capture_output=True)
    subprocess.run(["losetup", "-d", loop], check=True)
"""


def _instance(
    tmp_path: Path, image: Path, uri: str, die_after: int
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "instance.py"
    script.write_text(textwrap.dedent(INSTANCE))
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, str(script),
         str(image), str(tmp_path / "sys"), str(tmp_path / "mnt"), uri, VOLUME, str(die_after)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def _said(done: subprocess.CompletedProcess[str], key: str) -> Any:
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    return json.loads(lines[key])


@pytest.mark.skipif(not _can_mount(), reason="needs root, loop devices, mkfs.ext4 and unshare")
def test_a_replacement_finds_the_shards_on_the_cache_volume(
    tmp_path: Path, s3_bucket: tuple[str, Any]
) -> None:
    bucket, _ = s3_bucket
    folder = make_image_folder(tmp_path / "pets", per_class=6, per_class_test=2, size=12).root
    uri = f"s3://{bucket}/sets/pets"
    pushed = push(S3Store(bucket), folder, parse_s3(uri), shard_size=2000, parallel=4, log=print)
    shards = len(pushed.manifest.shards)
    assert shards >= 4
    image = tmp_path / "volume.img"  # a blank volume, as EBS makes one
    with open(image, "wb") as fh:
        fh.truncate(32 << 20)

    first = _instance(tmp_path, image, uri, die_after=3)
    assert first.returncode == 9, first.stderr  # killed mid-staging
    assert _said(first, "existing") == ["lost+found"]  # it formatted the blank volume

    second = _instance(tmp_path, image, uri, die_after=0)
    assert second.returncode == 0, second.stderr
    assert _said(second, "existing") == ["lost+found", "spotrun-data"]  # not formatted again
    result = _said(second, "result")
    # The first instance completed 3 shards before it died fetching the 4th: only the rest
    # were fetched, and the volume holds the pushed folder byte for byte.
    assert result["skipped"] == 3 and result["fetched"] == shards - 3
    expected = {
        p.relative_to(folder).as_posix(): p.read_bytes().hex()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }
    assert _said(second, "files") == expected
