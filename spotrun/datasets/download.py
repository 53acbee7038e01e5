"""Fetching a known data set (spotrun.datasets.known) into the data folder over HTTP(S).

The bytes go to NAME.part beside the file and are renamed into place only once their size and
sha256 are the table's: an interrupted fetch leaves a .part that the next one resumes (an HTTP
Range request), a wrong one leaves nothing. A file already in place is checked, never replaced.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from spotrun.core.errors import DataError
from spotrun.datasets.known import KnownDataSet

CHUNK_BYTES = 1 << 16
CONNECT_TIMEOUT_S = 60.0  # a silent server is an error, not a hang
PART_SUFFIX = ".part"

# (bytes so far, bytes in all)
ProgressReport = Callable[[int, int], None]


@dataclass(frozen=True)
class Fetched:
    path: Path
    url: str | None  # None: it was already in place
    resumed_at: int = 0  # bytes a previous fetch had left in the .part file


def source_url(entry: KnownDataSet, mirror: str | None) -> str:
    """Where the bytes come from: the set's home, or the same file name under a mirror."""
    if mirror:
        return f"{mirror.rstrip('/')}/{entry.file_name}"
    return entry.url


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_known(
    entry: KnownDataSet, data_dir: Path, *, mirror: str | None, progress: ProgressReport
) -> Fetched:
    """`entry` in `data_dir` under its file name, fetched unless it is already there."""
    target = data_dir / entry.file_name
    if target.exists():
        found = file_sha256(target) if target.is_file() else "not a file"
        if found != entry.sha256:
            raise DataError(
                f"{target} is there but is not {entry.name} (sha256 {found[:12]}..., "
                f"expected {entry.sha256[:12]}...)",
                hint="move it aside and run this again; spotrun never overwrites it",
            )
        return Fetched(target, None)
    url = source_url(entry, mirror)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"cannot make the data folder {data_dir}: {exc.strerror}") from exc
    part = data_dir / (entry.file_name + PART_SUFFIX)
    resumed_at = _usable_part(part, entry)
    try:
        written, digest, resumed_at = _stream(url, part, resumed_at, entry, progress)
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DataError(
            f"fetching {entry.name} from {url} failed: {reason}",
            hint=f"run `{entry.get_command()}` again: it goes on from the "
            f"{_bytes(part.stat().st_size if part.exists() else 0)} already fetched",
        ) from exc
    if written != entry.size or digest != entry.sha256:
        part.unlink(missing_ok=True)
        raise DataError(
            f"{url} sent {_bytes(written)} with sha256 {digest[:12]}..., not "
            f"{entry.name} ({_bytes(entry.size)}, sha256 {entry.sha256[:12]}...); nothing was kept",
            hint="the file at that address changed or the download was tampered with",
        )
    os.replace(part, target)
    return Fetched(target, url, resumed_at)


def _usable_part(part: Path, entry: KnownDataSet) -> int:
    """Bytes of an earlier fetch worth resuming from (a .part longer than the set restarts)."""
    try:
        size = part.stat().st_size
    except FileNotFoundError:
        return 0
    if size >= entry.size:
        part.unlink()
        return 0
    return size


def _stream(
    url: str,
    part: Path,
    offset: int,
    entry: KnownDataSet,
    progress: ProgressReport,
) -> tuple[int, str, int]:
    """Write the body of `url` to `part` from `offset`: the bytes the .part then holds, their
    sha256, and the offset the server did resume from."""
    request = urllib.request.Request(url)
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    with urllib.request.urlopen(request, timeout=CONNECT_TIMEOUT_S) as response:
        if response.status != 206:  # the whole file (a server may ignore Range): start over
            offset = 0
        digest = hashlib.sha256()
        if offset:
            with part.open("rb") as earlier:
                for chunk in iter(lambda: earlier.read(CHUNK_BYTES), b""):
                    digest.update(chunk)
        with part.open("ab" if offset else "wb") as handle:
            written = _copy(response, handle, offset, entry, digest, progress)
    return written, digest.hexdigest(), offset


def _copy(
    source: BinaryIO,
    handle: BinaryIO,
    done: int,
    entry: KnownDataSet,
    digest: hashlib._Hash,
    progress: ProgressReport,
) -> int:
    progress(done, entry.size)
    while chunk := source.read(CHUNK_BYTES):
        done += len(chunk)
        if done > entry.size:  # more than the set holds: no point reading on
            digest.update(chunk)
            return done
        handle.write(chunk)
        digest.update(chunk)
        progress(done, entry.size)
    handle.flush()
    os.fsync(handle.fileno())
    return done


def _bytes(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 100_000 else f"{count:,} bytes"
