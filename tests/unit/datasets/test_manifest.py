"""Manifest formats: format 2 (CRC-32 checked) is what a push writes; format 1 still reads."""

from __future__ import annotations

import json

import pytest

from spotrun.core.errors import UsageError
from spotrun.datasets.manifest import read_manifest

SHARD = {
    "name": "train-00000.tar",
    "split": "train",
    "size": 10240,
    "sha256": "ab" * 32,
    "files": 3,
    "content_bytes": 300,
}
BASE = {"layout": "image-folder", "name": "pets", "created_at": 0.0, "classes": ["cat"]}


def _manifest(**fields: object) -> str:
    return json.dumps({**BASE, "eval_split": "val", **fields})


def test_format_1_is_checked_with_sha256_and_format_2_with_crc32() -> None:
    old = read_manifest(_manifest(format="spotrun-shards/1", shards=[SHARD]), "m")
    assert old.checksum == "sha256" and old.shards[0].expected("sha256") == "ab" * 32
    new = read_manifest(
        _manifest(format="spotrun-shards/2", shards=[{**SHARD, "crc32": "0a1b2c3d"}]), "m"
    )
    assert new.checksum == "crc32" and new.shards[0].expected("crc32") == "0a1b2c3d"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"format": "spotrun-shards/2", "shards": [SHARD]}, "has no crc32"),
        ({"format": "spotrun-shards/1", "checksum": "crc32", "shards": [SHARD]}, "sha256 only"),
        ({"format": "spotrun-shards/2", "shards": [{**SHARD, "crc32": "XYZ"}]}, "8 lowercase"),
        ({"format": "spotrun-shards/9", "shards": []}, "upgrade spotrun"),
    ],
)
def test_a_manifest_without_the_checksums_it_names_is_refused(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        read_manifest(_manifest(**fields), "s3://b/set/manifest.json")
