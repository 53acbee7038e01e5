"""`data push` and the stager against moto's S3 (server mode, real HTTP, real ranged GETs)."""

from __future__ import annotations

import hashlib
import json
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest

from spotrun.cloud.aws.datasets import S3Store
from spotrun.core.errors import DataError, UsageError
from spotrun.datasets.manifest import read_manifest
from spotrun.datasets.progress import StagingStatus, read_status
from spotrun.datasets.push import parse_size, push
from spotrun.datasets.spec import parse_s3
from spotrun.datasets.stager import StageOptions, stage
from tests.unit.train.data.images import make_image_folder

Bucket = tuple[str, Any]
NO_RESERVE = StageOptions(streams=8, reserve_bytes=0, min_part_bytes=4096, log_every_s=0.0)


def _folder_bytes(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".spotrun-stage" not in p.parts
    }


def _pushed(tmp_path: Path, bucket: str, shard_size: int = 2000) -> tuple[Path, Any]:
    folder = make_image_folder(tmp_path / "pets", per_class=6, per_class_test=2, size=12).root
    dest = parse_s3(f"s3://{bucket}/sets/pets")
    result = push(S3Store(bucket), folder, dest, shard_size=shard_size, parallel=4, log=print)
    return folder, result.manifest


def test_push_then_stage_rebuilds_the_folder_byte_for_byte(
    tmp_path: Path, s3_bucket: Bucket
) -> None:
    bucket, s3 = s3_bucket
    folder, manifest = _pushed(tmp_path, bucket)
    assert len(manifest.shards) > 3 and {s.split for s in manifest.shards} == {"train", "test"}
    assert manifest.classes == ["cat", "dog", "frog"] and manifest.eval_split == "test"
    # Every shard in S3 is what the manifest says, with its sha256 as metadata too.
    for shard in manifest.shards:
        got = s3.get_object(Bucket=bucket, Key=f"sets/pets/{shard.name}")
        body = got["Body"].read()
        assert len(body) == shard.size and hashlib.sha256(body).hexdigest() == shard.sha256
        assert shard.crc32 == f"{zlib.crc32(body):08x}"
        assert got["Metadata"]["sha256"] == shard.sha256
    raw = s3.get_object(Bucket=bucket, Key="sets/pets/manifest.json")["Body"].read()
    assert read_manifest(raw, "m") == manifest

    status = tmp_path / "staging.json"
    lines: list[str] = []
    options = StageOptions(streams=8, reserve_bytes=0, min_part_bytes=1024, status_path=status)
    result = stage(
        S3Store(bucket),
        parse_s3(f"s3://{bucket}/sets/pets"),
        tmp_path / "nvme",
        options,
        lines.append,
    )
    assert _folder_bytes(result.dest) == _folder_bytes(folder)
    final = read_status(status.read_text())
    assert final is not None and final.state == "done"
    assert final.total_bytes == manifest.size == final.fetched_bytes
    assert any(line.startswith("staged s3://") for line in lines), lines

    # A second stage finds every shard in place and fetches nothing.
    again = stage(
        S3Store(bucket),
        parse_s3(f"s3://{bucket}/sets/pets"),
        tmp_path / "nvme",
        options,
        lines.append,
    )
    assert again.status.fetched_bytes == 0 and again.status.items_skipped == len(manifest.shards)


def test_a_corrupt_shard_is_fetched_again_then_staging_fails_clearly(
    tmp_path: Path, s3_bucket: Bucket
) -> None:
    bucket, s3 = s3_bucket
    folder, manifest = _pushed(tmp_path, bucket)
    store = S3Store(bucket)
    victim = manifest.shards[1]
    key = f"sets/pets/{victim.name}"
    good = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    bad = bytearray(good)
    bad[700] ^= 0xFF  # one flipped byte inside the first member's data

    # In transit: the first GET of the shard returns damaged bytes, the second good ones.
    flaky = _FlakyStore(store, key, bytes(bad), times=1, at=700)
    lines: list[str] = []
    result = stage(
        flaky, parse_s3(f"s3://{bucket}/sets/pets"), tmp_path / "a", NO_RESERVE, lines.append
    )
    assert result.status.refetched == 1
    assert any(victim.name in line and "fetching it again" in line for line in lines), lines
    assert _folder_bytes(result.dest) == _folder_bytes(folder)

    # At rest: the object in S3 itself is damaged: one re-fetch, then a DataError naming it,
    # and none of its files are left behind half-checked.
    s3.put_object(Bucket=bucket, Key=key, Body=bytes(bad))
    with pytest.raises(
        DataError, match=f"shard {victim.name} .* failed its check twice: its crc32"
    ):
        stage(store, parse_s3(f"s3://{bucket}/sets/pets"), tmp_path / "b", NO_RESERVE, lines.append)
    dest = tmp_path / "b" / bucket / "sets/pets"
    assert not (dest / ".spotrun-stage" / "done" / f"{victim.name}.json").exists()
    staged_names = set(_folder_bytes(dest))
    assert not any(name in staged_names for name in _member_names(good))

    # A manifest of format 1 (sha256 only, as pushed before CRC-32) is checked with sha256.
    old = json.loads(manifest.to_json())
    old["format"] = "spotrun-shards/1"
    del old["checksum"]
    for entry in old["shards"]:
        del entry["crc32"]
    s3.put_object(Bucket=bucket, Key="sets/pets/manifest.json", Body=json.dumps(old).encode())
    with pytest.raises(DataError, match=f"shard {victim.name} .* its sha256"):
        stage(store, parse_s3(f"s3://{bucket}/sets/pets"), tmp_path / "b1", NO_RESERVE, print)

    # A partial object (cut short) is caught the same way.
    s3.put_object(Bucket=bucket, Key=key, Body=good[: len(good) // 2])
    with pytest.raises(DataError, match=f"shard {victim.name}"):
        stage(store, parse_s3(f"s3://{bucket}/sets/pets"), tmp_path / "c", NO_RESERVE, lines.append)


def _member_names(tar_bytes: bytes) -> list[str]:
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        return [m.name for m in tar.getmembers()]


class _FlakyStore:
    """The real S3 store, except that the first `times` GETs of `key` that hold byte `at`
    return `bad` bytes (as a proxy that corrupts a transfer would). Counted on the range that
    holds the damaged byte: the ranges of one attempt are asked for in no fixed order."""

    def __init__(self, store: S3Store, key: str, bad: bytes, times: int, at: int) -> None:
        self.store, self.key, self.bad, self.left, self.at = store, key, bad, times, at
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def stream(self, key: str, start: int, end: int) -> Any:
        size, chunks = self.store.stream(key, start, end)
        with self._lock:
            corrupt = key == self.key and self.left > 0 and start <= self.at < end
            if corrupt:
                self.left -= 1
        if corrupt:
            list(chunks)  # the real transfer happened; its bytes are replaced
            return size, iter([self.bad[start:end]])
        return size, chunks


class _Interrupt(Exception):
    pass


def test_staging_interrupted_midway_resumes_without_fetching_again(
    tmp_path: Path, s3_bucket: Bucket
) -> None:
    bucket, _ = s3_bucket
    folder, manifest = _pushed(tmp_path, bucket)
    store = S3Store(bucket)
    source = parse_s3(f"s3://{bucket}/sets/pets")
    fetched: list[str] = []
    stop_after = 3

    class Dying:
        """Breaks off (as a killed process would stop fetching) after `stop_after` shards."""

        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def stream(self, key: str, start: int, end: int) -> Any:
            if len(fetched) >= stop_after:
                raise _Interrupt("the machine went away")
            fetched.append(key)
            return store.stream(key, start, end)

    one_stream = StageOptions(streams=1, reserve_bytes=0, log_every_s=0.0)
    with pytest.raises(_Interrupt):
        stage(Dying(), source, tmp_path / "disk", one_stream, print)  # type: ignore[arg-type]
    done_dir = tmp_path / "disk" / bucket / "sets/pets/.spotrun-stage/done"
    assert len(list(done_dir.iterdir())) == stop_after

    result = stage(store, source, tmp_path / "disk", NO_RESERVE, print)
    assert result.status.items_skipped == stop_after
    assert result.status.fetched_bytes == sum(s.size for s in manifest.shards[stop_after:])
    assert _folder_bytes(result.dest) == _folder_bytes(folder)


def test_bad_input_is_refused_clearly(tmp_path: Path, s3_bucket: Bucket) -> None:
    bucket, s3 = s3_bucket
    make_image_folder(tmp_path / "pets", per_class=2, per_class_test=1, size=8)
    store = S3Store(bucket)
    # Not enough disk: checked before a byte moves.
    _pushed(tmp_path / "x", bucket)
    huge = StageOptions(reserve_bytes=1 << 60)
    with pytest.raises(DataError, match="not enough disk to stage .* it needs"):
        stage(store, parse_s3(f"s3://{bucket}/sets/pets"), tmp_path / "d", huge, print)
    assert not list((tmp_path / "d").rglob("*.png"))
    # A prefix with nothing under it, a bucket that does not exist.
    with pytest.raises(UsageError, match="holds no manifest.json and no files"):
        stage(store, parse_s3(f"s3://{bucket}/nothing-here"), tmp_path / "e", NO_RESERVE, print)
    with pytest.raises(UsageError, match="S3 bucket 'no-such-bucket-zz' does not exist"):
        stage(
            S3Store("no-such-bucket-zz"),
            parse_s3("s3://no-such-bucket-zz/x"),
            tmp_path / "f",
            NO_RESERVE,
            print,
        )
    # A manifest that is not one, or lists a shard that was never uploaded.
    s3.put_object(Bucket=bucket, Key="broken/manifest.json", Body=b"{not json")
    with pytest.raises(UsageError, match="manifest.json is not JSON"):
        stage(store, parse_s3(f"s3://{bucket}/broken"), tmp_path / "g", NO_RESERVE, print)
    raw = json.loads(s3.get_object(Bucket=bucket, Key="sets/pets/manifest.json")["Body"].read())
    s3.put_object(Bucket=bucket, Key="partial/manifest.json", Body=json.dumps(raw).encode())
    with pytest.raises(UsageError, match="listed in the manifest but is not in S3"):
        stage(store, parse_s3(f"s3://{bucket}/partial"), tmp_path / "h", NO_RESERVE, print)
    # Sizes and addresses.
    assert parse_size("256MB") == 256_000_000 and parse_size("64MiB") == 64 << 20
    for text in ("abc", "0MB", "12XB", "100kB"):
        with pytest.raises(UsageError):
            parse_size(text)
    with pytest.raises(UsageError, match="not an S3 bucket name"):
        parse_s3("s3://Bad_Bucket/x")


def test_a_plain_folder_tree_without_a_manifest_is_staged_file_by_file(
    tmp_path: Path, s3_bucket: Bucket
) -> None:
    bucket, s3 = s3_bucket
    folder = make_image_folder(tmp_path / "pets", per_class=2, per_class_test=1, size=8).root
    for path in sorted(folder.rglob("*.png")):
        s3.put_object(
            Bucket=bucket, Key=f"tree/{path.relative_to(folder).as_posix()}", Body=path.read_bytes()
        )
    s3.put_object(Bucket=bucket, Key="tree-old/train/x/y.png", Body=b"a namesake prefix")
    source = parse_s3(f"s3://{bucket}/tree")
    lines: list[str] = []
    result = stage(S3Store(bucket), source, tmp_path / "disk", NO_RESERVE, lines.append)
    assert result.status.kind == "files" and result.status.items_total == 9
    assert _folder_bytes(result.dest) == _folder_bytes(folder)
    assert any("no manifest: file by file" in line for line in lines)
    again = stage(S3Store(bucket), source, tmp_path / "disk", NO_RESERVE, lines.append)
    assert again.status.fetched_bytes == 0


def test_the_progress_line_says_bytes_rate_and_time_left() -> None:
    status = StagingStatus("s3://b/imagenet", "/nvme/b/imagenet", state="staging")
    status.total_bytes, status.done_bytes = 148 * 10**9, 37 * 10**9
    status.rate_bps, status.eta_s = 1.2e9, 111 * 10**9 / 1.2e9
    assert status.line() == "staging 37.0 GB / 148.0 GB, 1.2 GB/s, 2 min left"
