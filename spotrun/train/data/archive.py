"""Data set archives: read a small one straight into memory, or unpack a large one once into
the cache folder and find it there next time."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from spotrun.core.errors import UsageError
from spotrun.train.data.source import (
    EVAL_SPLITS,
    IMAGE_FOLDER_LAYOUT,
    TRAIN_SPLIT,
    is_image_name,
)


def archive_key(archive: Path) -> str:
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
    target = cache_dir / "unpacked" / f"{_stem(archive)}-{archive_key(archive)}"
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


@dataclass(frozen=True)
class ArchiveSplit:
    """One split of an ImageFolder archive, read into memory: (member name, encoded image)."""

    classes: tuple[str, ...]
    refs: list[tuple[str, bytes]]
    labels: list[int]


def read_image_archive(archive: Path) -> tuple[ArchiveSplit, ArchiveSplit]:
    """(train, eval) images of an ImageFolder tar archive, read in one pass, nothing unpacked.

    Members are taken as [top folders/]split/class/image; the eval split is val/ or else test/.
    """
    found: dict[str, dict[str, list[tuple[str, bytes]]]] = {}
    prefix: tuple[str, ...] | None = None
    started = time.perf_counter()
    print(f"reading {archive} into memory", flush=True)
    try:
        with tarfile.open(archive, "r|*") as tar:
            for member in tar:
                parts = PurePosixPath(member.name).parts
                if not member.isfile() or len(parts) < 3 or not is_image_name(parts[-1]):
                    continue
                split, name = parts[-3], parts[-2]
                if split not in (TRAIN_SPLIT, *EVAL_SPLITS) or name.startswith("."):
                    continue
                if prefix is None:
                    prefix = parts[:-3]
                elif parts[:-3] != prefix:
                    continue  # another data set nested beside this one
                handle = tar.extractfile(member)
                if handle is not None:
                    found.setdefault(split, {}).setdefault(name, []).append(
                        (member.name, handle.read())
                    )
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UsageError(f"cannot read {archive} as a tar archive ({exc})") from exc
    print(f"read {archive.name} in {time.perf_counter() - started:.1f} s", flush=True)
    where = f"{archive} (inside)"
    if TRAIN_SPLIT not in found:
        raise UsageError(f"{where} has no train/ images", hint=f"expected {IMAGE_FOLDER_LAYOUT}")
    eval_name = next((s for s in EVAL_SPLITS if s in found), None)
    if eval_name is None:
        raise UsageError(
            f"{where} has train/ but neither val/ nor test/", hint=f"expected {IMAGE_FOLDER_LAYOUT}"
        )
    classes = tuple(sorted(found[TRAIN_SPLIT]))
    unknown = sorted(set(found[eval_name]) - set(classes))
    if unknown:
        raise UsageError(
            f"{where}: {eval_name}/ has classes that train/ lacks: {', '.join(unknown[:5])}",
            hint="the evaluation split's class folders must be among the training split's",
        )

    def collect(name: str) -> ArchiveSplit:
        refs: list[tuple[str, bytes]] = []
        labels: list[int] = []
        for label, cls in enumerate(classes):
            members = sorted(found[name].get(cls, []))
            refs.extend(members)
            labels.extend([label] * len(members))
        return ArchiveSplit(classes, refs, labels)

    return collect(TRAIN_SPLIT), collect(eval_name)
