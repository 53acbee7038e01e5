"""A damaged shard is a DataError after one re-fetch, never a raw ValueError or OSError, and
leaves none of its files behind (issue 18, class 4)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import tarfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spotrun.cloud.aws.datasets import S3Store
from spotrun.core.errors import DataError
from spotrun.datasets.extract import (
    DirCache,
    Extracted,
    HashingReader,
    ShardContentError,
    extract_shard,
)
from spotrun.datasets.push import push
from spotrun.datasets.spec import parse_s3
from spotrun.datasets.stager import StageOptions, stage
from tests.unit.train.data.images import make_image_folder

Bucket = tuple[str, Any]
NO_RESERVE = StageOptions(streams=4, reserve_bytes=0, min_part_bytes=4096, log_every_s=0.0)


def _tar(members: list[tuple[str, bytes]], pax: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if pax:
                info.pax_headers = dict(pax)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _with_bad_pax_size(good: bytes) -> bytes:
    """The first member's pax header says size=abc: not a number (as long as the real one)."""
    raw = bytearray(good)
    at = raw.find(b" size=")
    assert at > 0
    end = raw.index(b"\n", at)
    raw[at + 6 : end] = b"abcd".ljust(end - at - 6, b"x")[: end - at - 6]
    return bytes(raw)


GOOD = _tar([("train/a/1.png", b"x" * 700), ("train/a/2.png", b"y" * 30)], pax={"size": "700"})


@settings(max_examples=120, deadline=None)
@given(
    at=st.integers(min_value=0, max_value=len(GOOD) - 1),
    byte=st.integers(min_value=0, max_value=255),
    cut=st.one_of(st.none(), st.integers(min_value=0, max_value=len(GOOD))),
)
def test_any_damaged_shard_is_a_content_error(
    tmp_path_factory: Any, at: int, byte: int, cut: int | None
) -> None:
    data = bytearray(GOOD)
    data[at] = byte
    blob = bytes(data[:cut] if cut is not None else data)
    dest = tmp_path_factory.mktemp("x")
    got = Extracted()
    with contextlib.suppress(ShardContentError):
        extract_shard(HashingReader(io.BytesIO(blob)), dest, "train", DirCache(), got)
    for name in got.names:  # whatever it wrote stayed inside, under the split
        assert (dest / name).resolve().is_relative_to(dest / "train")


def _shard_entry(name: str, split: str, data: bytes, files: int) -> dict[str, object]:
    return {
        "name": name,
        "split": split,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "crc32": f"{zlib.crc32(data):08x}",
        "files": files,
        "content_bytes": 0,
    }


@pytest.mark.parametrize(
    "bad",
    [
        _with_bad_pax_size(GOOD),
        _tar([("train/a/clash", b"a file"), ("train/a/clash/inside.png", b"then a folder")]),
    ],
    ids=["pax-size-abcd", "file-then-folder"],
)
def test_a_shard_that_cannot_be_extracted_is_refetched_then_refused(
    tmp_path: Path, s3_bucket: Bucket, bad: bytes
) -> None:
    bucket, s3 = s3_bucket
    folder = make_image_folder(tmp_path / "pets", per_class=2, per_class_test=1, size=8).root
    source = parse_s3(f"s3://{bucket}/sets/pets")
    manifest = push(
        S3Store(bucket), folder, source, shard_size=2000, parallel=2, log=print
    ).manifest
    raw = json.loads(manifest.to_json())
    raw["shards"].append(_shard_entry("train-bad.tar", "train", bad, 2))
    s3.put_object(Bucket=bucket, Key="sets/pets/train-bad.tar", Body=bad)
    s3.put_object(Bucket=bucket, Key="sets/pets/manifest.json", Body=json.dumps(raw).encode())
    lines: list[str] = []
    with pytest.raises(DataError, match="shard train-bad.tar .* failed its check twice"):
        stage(S3Store(bucket), source, tmp_path / "disk", NO_RESERVE, lines.append)
    assert any("train-bad.tar" in line and "fetching it again" in line for line in lines), lines
    dest = tmp_path / "disk" / bucket / "sets/pets"
    assert not (dest / "train/a/clash").is_file()
    assert not (dest / "train/a/1.png").exists()
    assert not (dest / ".spotrun-stage" / "done" / "train-bad.tar.json").exists()
