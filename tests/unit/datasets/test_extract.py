"""The tar reader the stager extracts with: every member type tarfile writes (ustar, pax with
long and non-ASCII names, GNU long names, folders), byte for byte, and what it refuses."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from spotrun.datasets.extract import (
    DirCache,
    Extracted,
    HashingReader,
    ShardContentError,
    extract_shard,
)


class Dribble:
    """Hands the bytes out in uneven pieces, as chunks of a download arrive."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.pos, self.step = data, 0, step

    def read(self, size: int = -1) -> bytes:
        n = min(size if size >= 0 else len(self.data), self.step)
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        return out


def _tar(
    members: dict[str, bytes | None], fmt: int, extra: tuple[tarfile.TarInfo, ...] = ()
) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return out.getvalue()


def _extract(data: bytes, dest: Path, step: int = 777) -> tuple[Extracted, HashingReader]:
    reader = HashingReader(Dribble(data, step))
    return extract_shard(reader, dest, "train", DirCache(), Extracted()), reader


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT, tarfile.GNU_FORMAT])
def test_every_header_kind_lands_byte_for_byte(tmp_path: Path, fmt: int) -> None:
    long_dir = "d" * 90
    members: dict[str, bytes | None] = {
        "train/cat": None,
        "train/cat/a.jpg": b"x" * 1000,
        "train/cat/empty.jpg": b"",
        f"train/{long_dir}/{'n' * 60}.jpg": bytes(range(256)) * 40,  # over 100 characters
        "train/dog/b.jpg": b"y" * 512,
    }
    if fmt == tarfile.PAX_FORMAT:
        members["train/d\u00e9j\u00e0/\u00e9t\u00e9.jpg"] = b"pax"  # a pax path record
    data = _tar(members, fmt)
    for step in (1 << 20, 777, 512):
        dest = tmp_path / str(step)
        got, reader = _extract(data, dest, step)
        files = {k: v for k, v in members.items() if v is not None}
        assert got.files == len(files) and sorted(got.names) == sorted(files)
        assert {n: (dest / n).read_bytes() for n in files} == files
        assert reader.count == len(data)  # the closing blocks count in the checksum
        assert reader.hexdigest() == hashlib.sha256(data).hexdigest()


def test_what_is_refused(tmp_path: Path) -> None:
    link = tarfile.TarInfo("train/cat/link.jpg")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    damaged = bytearray(_tar({"train/cat/a.jpg": b"1"}, tarfile.PAX_FORMAT))
    damaged[10] ^= 0x01  # in the name: the header's checksum no longer holds
    cases = {
        "bad checksum": bytes(damaged),
        "not a regular file": _tar({}, tarfile.PAX_FORMAT, (link,)),
        "outside the shard's split": _tar({"val/cat/a.jpg": b"1"}, tarfile.PAX_FORMAT),
        "not a plain relative path": _tar({"train/../../x.jpg": b"1"}, tarfile.PAX_FORMAT),
        "cut short": _tar({"train/cat/a.jpg": b"1" * 5000}, tarfile.PAX_FORMAT)[:3000],
        "not a readable tar stream": b"this is not a tar file at all" * 40,
    }
    for message, data in cases.items():
        with pytest.raises(ShardContentError, match=message):
            _extract(data, tmp_path / "out")
    assert not (tmp_path / "etc").exists() and not (tmp_path.parent / "x.jpg").exists()
