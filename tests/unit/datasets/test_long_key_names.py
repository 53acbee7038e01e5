"""A bucket key's file name as long as a file system takes (issue 38, point 9): staging wrote
it first as `.NAME.part`, 6 bytes over the 255 a name may have, and the OSError of that
(raised again by the clean-up of the same name) ended the job with a traceback in job.log.
A 252-byte name now stages; a name longer than any file system takes is one DataError.
Against moto's S3, as the instance stages it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spotrun.cloud.aws.datasets import S3Store
from spotrun.core.errors import DataError
from spotrun.core.safe_paths import part_path
from spotrun.datasets.spec import parse_s3
from spotrun.datasets.stager import StageOptions, stage
from tests.unit.train.data.images import make_image_folder

NO_RESERVE = StageOptions(streams=4, reserve_bytes=0, min_part_bytes=4096, log_every_s=0.0)


def _tree(s3: Any, bucket: str, tmp_path: Path, prefix: str) -> None:
    folder = make_image_folder(tmp_path / "pets", per_class=1, per_class_test=1, size=8).root
    for path in sorted(folder.rglob("*.png")):
        rel = path.relative_to(folder).as_posix()
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=path.read_bytes())


def test_a_key_with_a_252_byte_file_name_stages(tmp_path: Path, s3_bucket: tuple[str, Any]) -> None:
    bucket, s3 = s3_bucket
    _tree(s3, bucket, tmp_path, "tree")
    long_name = "x" * 248 + ".png"  # 252 bytes
    s3.put_object(Bucket=bucket, Key=f"tree/train/cat/{long_name}", Body=b"long")
    result = stage(
        S3Store(bucket), parse_s3(f"s3://{bucket}/tree"), tmp_path / "disk", NO_RESERVE, print
    )
    (staged,) = (p for p in result.dest.rglob("*.png") if p.name == long_name)
    assert staged.read_bytes() == b"long"
    assert not [p for p in result.dest.rglob("*.part")]


def test_a_file_name_no_file_system_takes_is_one_data_error(
    tmp_path: Path, s3_bucket: tuple[str, Any]
) -> None:
    bucket, s3 = s3_bucket
    _tree(s3, bucket, tmp_path, "tree")
    s3.put_object(Bucket=bucket, Key=f"tree/train/cat/{'y' * 300}.png", Body=b"too long")
    with pytest.raises(DataError, match="File name too long"):
        stage(
            S3Store(bucket), parse_s3(f"s3://{bucket}/tree"), tmp_path / "disk", NO_RESERVE, print
        )


def test_a_part_name_fits_where_its_file_fits() -> None:
    assert part_path(Path("/d/a.png")) == Path("/d/.a.png.part")
    long = part_path(Path("/d") / ("é" * 127))  # 254 bytes
    assert long.parent == Path("/d") and len(long.name.encode()) < 60
    assert long != part_path(Path("/d") / ("é" * 126 + "e"))
