"""Extract a tar shard into place as its bytes arrive, checksumming them on the way.

Only regular files under the shard's own split folder are written (no links, devices or
paths that climb out), each straight to its final name: there is no second copy of the data.
A shard that fails its checksum is fetched again over the same names; `remove_files` clears
what a failed attempt left.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

READ_BYTES = 1 << 20
# tarfile's stream mode copies what is left of its buffer on every small read (each header):
# a buffer of 64 KiB measured faster than 1 MiB for ~110 kB files (bench/staging_throughput.py).
TAR_BUFFER = 1 << 16


class Readable(Protocol):
    def read(self, size: int = -1) -> bytes: ...


class ShardContentError(Exception):
    """A shard holds something that must not be written (or is not a tar at all)."""


class HashingReader:
    """Reads through `source`, keeping a digest (sha256 by default; None: no digest) and a
    count of every byte read."""

    def __init__(
        self,
        source: Readable,
        on_bytes: Callable[[int], None] | None = None,
        algorithm: str | None = "sha256",
    ) -> None:
        self.source = source
        self.digest = hashlib.new(algorithm) if algorithm else None
        self.count = 0
        self._on_bytes = on_bytes

    def hexdigest(self) -> str:
        return self.digest.hexdigest() if self.digest is not None else ""

    def read(self, size: int = -1) -> bytes:
        data = self.source.read(size)
        if data:
            if self.digest is not None:
                self.digest.update(data)
            self.count += len(data)
            if self._on_bytes is not None:
                self._on_bytes(len(data))
        return data

    def drain(self) -> None:
        """Read to the end (the tar's closing blocks and padding count in its checksum)."""
        while self.read(READ_BYTES):
            pass


def safe_member_path(name: str, split: str) -> PurePosixPath:
    """`name` as a relative path inside `split`/, or ShardContentError."""
    path = PurePosixPath(name)
    parts = path.parts
    if path.is_absolute() or not parts or any(p in ("", ".", "..") for p in parts):
        raise ShardContentError(f"member '{name}' is not a plain relative path")
    if parts[0] != split or len(parts) < 2:
        raise ShardContentError(f"member '{name}' is outside the shard's split folder {split}/")
    return path


@dataclass
class Extracted:
    files: int = 0
    content_bytes: int = 0
    names: list[str] = field(default_factory=list)


class DirCache:
    """Folders already made, shared by the threads that extract into one destination."""

    def __init__(self) -> None:
        self._made: set[Path] = set()

    def ensure(self, folder: Path) -> None:
        if folder in self._made:
            return
        folder.mkdir(parents=True, exist_ok=True)
        self._made.add(folder)


def extract_shard(
    reader: HashingReader, dest: Path, split: str, dirs: DirCache, into: Extracted
) -> Extracted:
    """Write every member of the tar stream in `reader` under `dest`; names go to `into` as
    they are written (so a failed attempt's files can be found and removed)."""
    try:
        with tarfile.open(fileobj=reader, mode="r|", bufsize=TAR_BUFFER) as tar:  # type: ignore[call-overload]
            for member in tar:
                if member.isdir():
                    continue
                if not member.isreg():
                    raise ShardContentError(f"member '{member.name}' is not a regular file")
                rel = safe_member_path(member.name, split)
                target = dest / rel
                dirs.ensure(target.parent)
                source = tar.extractfile(member)
                if source is None:  # pragma: no cover - regular members always have data
                    raise ShardContentError(f"member '{member.name}' has no data")
                into.names.append(str(rel))
                # os.open/os.write: no buffered file object per file (ImageNet has 1.3 M)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    left = member.size
                    while left > 0:
                        data = source.read(min(left, READ_BYTES))
                        if not data:
                            raise ShardContentError(f"member '{member.name}' is cut short")
                        view = memoryview(data)
                        while view:
                            view = view[os.write(fd, view) :]
                        left -= len(data)
                finally:
                    os.close(fd)
                into.files += 1
                into.content_bytes += member.size
    except (tarfile.TarError, EOFError) as exc:
        raise ShardContentError(f"not a readable tar stream ({exc})") from exc
    reader.drain()
    return into


def remove_files(dest: Path, names: list[str]) -> None:
    for name in names:
        try:
            os.unlink(dest / name)
        except FileNotFoundError:
            continue
