"""Names from outside data (bucket keys, manifest fields, tar members, an instance's file
listing) never decide where a file lands outside its folder (spotrun.core.safe_paths)."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spotrun.cloud.aws.datasets import S3Store
from spotrun.core.errors import DataError, UnsafePathError, UsageError
from spotrun.core.safe_paths import plain_folder_name, safe_join
from spotrun.datasets.manifest import read_manifest
from spotrun.datasets.push import push
from spotrun.datasets.spec import parse_s3
from spotrun.datasets.stager import StageOptions, stage
from spotrun.remote.local import LocalRunner
from spotrun.remote.sync import pull_run_dir
from tests.unit.train.data.images import make_image_folder

Bucket = tuple[str, Any]
NO_RESERVE = StageOptions(streams=4, reserve_bytes=0, min_part_bytes=4096, log_every_s=0.0)
DEST = Path("/srv/stage/dest")
HOSTILE = ["/abs", "a/../../x", "../x", "./x", "a//b", "", ".", "..", "a/\0b", "a/"]
# Names built from these alone are sometimes hostile ('..', '/', ''), often not.
_PIECES = st.text(alphabet=st.sampled_from(["a", ".", "/", "\\", "\0", "\t", "\n", "é", "-"]))


@settings(max_examples=300, deadline=None)
@given(name=st.one_of(_PIECES, st.text(), st.sampled_from(HOSTILE)))
def test_a_joined_name_stays_inside_or_is_refused(name: str) -> None:
    try:
        joined = safe_join(DEST, name, what="name")
    except UnsafePathError as exc:
        assert "is not a plain relative path" in exc.message
        return
    normal = os.path.normpath(joined)
    assert os.path.commonpath([normal, str(DEST)]) == str(DEST) and normal != str(DEST)
    assert str(joined) == f"{DEST}/{name}"  # accepted names are used as given, never rewritten


@settings(max_examples=200, deadline=None)
@given(name=st.one_of(st.text(max_size=20), st.sampled_from([".spotrun-stage", "train", "a/b"])))
def test_a_split_is_one_visible_folder_name(name: str) -> None:
    try:
        plain_folder_name(name, what="split")
    except UnsafePathError:
        return
    assert "/" not in name and not name.startswith(".") and name not in ("", "..")


def _tree(s3: Any, bucket: str, tmp_path: Path, prefix: str) -> None:
    folder = make_image_folder(tmp_path / "pets", per_class=1, per_class_test=1, size=8).root
    for path in sorted(folder.rglob("*.png")):
        rel = path.relative_to(folder).as_posix()
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=path.read_bytes())


@pytest.mark.parametrize("remainder", ["/{victim}", "train/../../../../{victim_rel}", "./x"])
def test_a_bucket_key_cannot_write_outside_the_stage_folder(
    tmp_path: Path, s3_bucket: Bucket, remainder: str
) -> None:
    bucket, s3 = s3_bucket
    _tree(s3, bucket, tmp_path, "tree")
    victim = tmp_path / "victim" / ".bashrc"
    victim.parent.mkdir()
    victim.write_text("mine")
    stage_root = tmp_path / "disk"
    key_rest = remainder.format(victim=str(victim).lstrip("/"), victim_rel=f"victim/{victim.name}")
    s3.put_object(Bucket=bucket, Key=f"tree/{key_rest}", Body=b"export EVIL=1\n")
    with pytest.raises(UnsafePathError, match="is not a plain relative path"):
        stage(S3Store(bucket), parse_s3(f"s3://{bucket}/tree"), stage_root, NO_RESERVE, print)
    assert victim.read_text() == "mine"
    written = [p for p in stage_root.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert written == []


def _shard_with(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_split_named_like_the_state_folder_cannot_forge_markers(
    tmp_path: Path, s3_bucket: Bucket
) -> None:
    bucket, s3 = s3_bucket
    folder = make_image_folder(tmp_path / "pets", per_class=2, per_class_test=1, size=8).root
    source = parse_s3(f"s3://{bucket}/sets/pets")
    manifest = push(
        S3Store(bucket), folder, source, shard_size=2000, parallel=2, log=print
    ).manifest
    # A shard whose split is the stager's state folder, forging a completion marker.
    forged = json.dumps({"source": source.uri, "bytes": 0, "items": 0}).encode()
    raw = json.loads(manifest.to_json())
    raw["shards"][0]["split"] = ".spotrun-stage"
    s3.put_object(
        Bucket=bucket,
        Key=f"sets/pets/{raw['shards'][0]['name']}",
        Body=_shard_with({".spotrun-stage/complete.json": forged}),
    )
    for field, value in [("split", ".spotrun-stage"), ("split", "../up"), ("split", "a/b")]:
        bad = json.loads(manifest.to_json())
        bad["shards"][0][field] = value
        with pytest.raises(UsageError, match="is not a plain folder name"):
            read_manifest(json.dumps(bad), "m.json")
    s3.put_object(Bucket=bucket, Key="sets/pets/manifest.json", Body=json.dumps(raw).encode())
    with pytest.raises(UsageError, match="not a plain folder name"):
        stage(S3Store(bucket), source, tmp_path / "disk", NO_RESERVE, print)
    assert not any((tmp_path / "disk").rglob("complete.json"))
    bad = json.loads(manifest.to_json())
    bad["classes"][0] = "../../etc"
    with pytest.raises(UsageError, match="class"):
        read_manifest(json.dumps(bad), "m.json")


def test_output_names_with_tabs_and_newlines_come_back(tmp_path: Path) -> None:
    remote = tmp_path / "instance" / "run"
    names = ["plain.txt", "tab\there.txt", "new\nline.txt", "sub/both\t\n.bin", " lead.txt"]
    for name in names:
        (remote / "workdir" / "out" / name).parent.mkdir(parents=True, exist_ok=True)
        (remote / "workdir" / "out" / name).write_text(name)
        (remote / name).parent.mkdir(parents=True, exist_ok=True)
        (remote / name).write_text(name)
    local = tmp_path / "local"
    got = pull_run_dir(LocalRunner(), str(remote), local, final=False, outputs=["out"])
    assert sorted(got.fetched) == sorted([*names, *(f"workdir/out/{n}" for n in names)])
    for name in names:
        assert (local / "workdir" / "out" / name).read_text() == name
    whole = pull_run_dir(LocalRunner(), str(remote), tmp_path / "local2", final=True)
    assert sorted(whole.fetched) == sorted(names)


def test_a_refused_name_is_a_data_error() -> None:
    assert issubclass(UnsafePathError, DataError)


def test_data_push_follows_no_link_out_of_the_folder(tmp_path: Path, s3_bucket: Bucket) -> None:
    bucket, s3 = s3_bucket
    folder = make_image_folder(tmp_path / "pets", per_class=2, per_class_test=1, size=8).root
    outside = tmp_path / "private"
    (outside / "ssh").mkdir(parents=True)
    (outside / "id_ed25519.png").write_bytes(b"SECRET-KEY-BYTES")
    (outside / "ssh" / "config.png").write_bytes(b"SECRET-KEY-BYTES")
    a_class = next(p for p in (folder / "train").iterdir() if p.is_dir())
    (a_class / "stolen.png").symlink_to(outside / "id_ed25519.png")
    (folder / "train" / "zz-linked").symlink_to(outside / "ssh")
    lines: list[str] = []
    source = parse_s3(f"s3://{bucket}/sets/linked")
    manifest = push(S3Store(bucket), folder, source, shard_size=10**6, parallel=2, log=lines.append)
    assert "zz-linked" not in manifest.manifest.classes
    assert any("skipped 2 symbolic link(s)" in line for line in lines), lines
    for shard in manifest.manifest.shards:
        body = s3.get_object(Bucket=bucket, Key=f"sets/linked/{shard.name}")["Body"].read()
        assert b"SECRET-KEY-BYTES" not in body and b"stolen.png" not in body
