"""Unpack a data set archive once into the cache folder, and find it there next time."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

from spotrun.errors import UsageError


def _archive_key(archive: Path) -> str:
    """Changes when the archive is replaced: its absolute path, size and modification time."""
    stat = archive.stat()
    text = f"{archive.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _stem(archive: Path) -> str:
    name = archive.name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def unpacked(archive: Path, cache_dir: Path) -> Path:
    """The folder holding `archive`'s contents, unpacking it first if this is the first use.

    Unpacking goes to a temporary folder beside the target and is renamed into place when
    complete, so an interrupted unpack is never mistaken for a finished one, and two processes
    unpacking at once both end with the same folder.
    """
    target = cache_dir / "unpacked" / f"{_stem(archive)}-{_archive_key(archive)}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    started = time.perf_counter()
    print(f"unpacking {archive} into {target}", flush=True)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")  # refuses absolute paths, links out, devices
        os.rename(tmp, target)
    except (tarfile.TarError, EOFError) as exc:
        raise UsageError(f"cannot unpack {archive}: {exc}") from exc
    except OSError as exc:
        if not target.is_dir():
            raise UsageError(f"cannot unpack {archive} into {target.parent}: {exc}") from exc
        # another process renamed its copy into place first: use that one
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"unpacked {archive.name} in {time.perf_counter() - started:.1f} s", flush=True)
    return target
