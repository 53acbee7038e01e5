"""`spotrun data push`: an ImageFolder packed into tar shards, uploaded in parallel, manifest last.

Each shard holds the files of one split (train/, val/ or test/) under their own relative paths,
so extracting every shard into one folder gives the ImageFolder back. Tar headers are
normalised (mtime 0, root-owned, mode 0644) so the same folder always packs to the same bytes.
With `images` (`--max-side`) each training image is stored training-ready instead
(training_ready.py) and the manifest says so; `keep_original` pushes the folder as it is
beside it, under PREFIX/original. Shards are packed and uploaded by `parallel` workers; each
shard's temporary file is removed once it is uploaded, so the local disk holds at most
`parallel` shards at a time.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from spotrun.core.errors import UsageError
from spotrun.datasets.manifest import MANIFEST_NAME, Manifest, Shard, StoredImages
from spotrun.datasets.objects import ObjectStore
from spotrun.datasets.progress import fmt_bytes, fmt_rate
from spotrun.datasets.spec import S3Data
from spotrun.datasets.training_ready import training_ready
from spotrun.train.data.source import (
    EVAL_SPLITS,
    IMAGE_FOLDER_LAYOUT,
    TRAIN_SPLIT,
    class_names,
    is_image_name,
)

TAR_BLOCK = 512
UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
}


def parse_size(text: str) -> int:
    """'256MB' -> 256_000_000; a UsageError for anything else than NUMBER[unit]."""
    cleaned = text.strip().upper().replace(" ", "")
    digits = cleaned.rstrip("KMGIB")
    unit = cleaned[len(digits) :]
    try:
        value = float(digits)
    except ValueError:
        value = -1.0
    if unit not in UNITS or value <= 0:
        raise UsageError(
            f"'{text}' is not a size", hint="write it like 256MB, 1GB or 64MiB (at least 1MB)"
        )
    size = int(value * UNITS[unit])
    if size < 10**6:
        raise UsageError(f"shard size {text} is below 1MB", hint="use 64MB to 1GB")
    return size


@dataclass(frozen=True)
class Member:
    rel: str  # split/class/file
    path: Path
    size: int

    @property
    def tar_bytes(self) -> int:
        """Its header plus its data padded to whole blocks (long names may add a pax header)."""
        return TAR_BLOCK + -(-self.size // TAR_BLOCK) * TAR_BLOCK


@dataclass(frozen=True)
class PlannedShard:
    name: str
    split: str
    members: tuple[Member, ...]


def _classes(split_dir: Path, skipped: list[str]) -> list[str]:
    """The split's class folders, less those that are symbolic links (into `skipped`): a link
    could carry a folder from anywhere on this machine into the bucket."""
    names = []
    for name in class_names(split_dir):
        if (split_dir / name).is_symlink():
            skipped.append(f"{split_dir.name}/{name}/")
        else:
            names.append(name)
    return names


def _split_members(root: Path, split: str, skipped: list[str]) -> list[Member]:
    members = []
    for name in _classes(root / split, skipped):
        with os.scandir(root / split / name) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if not is_image_name(entry.name):
                    continue
                if entry.is_symlink():  # never followed, as the workdir push does not
                    skipped.append(f"{split}/{name}/{entry.name}")
                elif entry.is_file(follow_symlinks=False):
                    members.append(
                        Member(
                            f"{split}/{name}/{entry.name}",
                            Path(entry.path),
                            entry.stat(follow_symlinks=False).st_size,
                        )
                    )
    if not members:
        raise UsageError(f"{root / split} holds no images", hint=f"expected {IMAGE_FOLDER_LAYOUT}")
    return members


def plan_shards(
    root: Path, shard_size: int, skipped: list[str] | None = None
) -> tuple[list[str], str, list[PlannedShard]]:
    """(train classes, evaluation split, shards) for the ImageFolder at `root`; the symbolic
    links it leaves out go to `skipped`."""
    skipped = [] if skipped is None else skipped
    if not root.is_dir():
        raise UsageError(f"{root} is not a folder", hint=f"expected {IMAGE_FOLDER_LAYOUT}")
    if not (root / TRAIN_SPLIT).is_dir():
        raise UsageError(f"{root} has no train/ folder", hint=f"expected {IMAGE_FOLDER_LAYOUT}")
    splits = [TRAIN_SPLIT] + [s for s in EVAL_SPLITS if (root / s).is_dir()]
    linked = [s for s in splits if (root / s).is_symlink()]
    if linked:
        raise UsageError(
            f"{root / linked[0]} is a symbolic link; spotrun does not follow links out of the "
            "data folder",
            hint="copy the split into the folder",
        )
    if len(splits) == 1:
        raise UsageError(
            f"{root} has train/ but neither val/ nor test/", hint=f"expected {IMAGE_FOLDER_LAYOUT}"
        )
    shards: list[PlannedShard] = []
    for split in splits:
        current: list[Member] = []
        filled = 0
        count = 0
        for member in _split_members(root, split, skipped):
            if current and filled + member.tar_bytes > shard_size:
                shards.append(PlannedShard(f"{split}-{count:05d}.tar", split, tuple(current)))
                current, filled, count = [], 0, count + 1
            current.append(member)
            filled += member.tar_bytes
        shards.append(PlannedShard(f"{split}-{count:05d}.tar", split, tuple(current)))
    return _classes(root / TRAIN_SPLIT, []), splits[1], shards


class _HashingFile:
    """A write-only file that checksums what passes through it (sha256 and CRC-32)."""

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "wb")
        self.sha256 = hashlib.sha256()
        self.crc32 = 0
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.crc32 = zlib.crc32(data, self.crc32)
        self.size += len(data)
        return self._fh.write(data)

    def close(self) -> None:
        self._fh.close()


def write_shard(planned: PlannedShard, path: Path, images: StoredImages | None = None) -> Shard:
    """Write `planned` as a tar at `path` (each image training-ready when `images` says
    how); its manifest entry."""
    out = _HashingFile(path)
    content = 0
    try:
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
            for member in planned.members:
                info = tarfile.TarInfo(member.rel)
                info.size = member.size
                info.mtime = 0
                info.mode = 0o644
                # Only the training split: it is what every epoch decodes; the evaluation
                # split (a 256 px test needs a shorter side of 293) stays as it was.
                ready = None
                if images is not None and planned.split == TRAIN_SPLIT:
                    ready = training_ready(member.path, images)
                if ready is not None:
                    info.size = len(ready)
                    tar.addfile(info, io.BytesIO(ready))
                else:
                    with open(member.path, "rb") as source:
                        tar.addfile(info, source)
                content += info.size
    except OSError as exc:
        raise UsageError(f"cannot read {exc.filename}: {exc.strerror}") from exc
    finally:
        out.close()
    return Shard(
        name=planned.name,
        split=planned.split,
        size=out.size,
        sha256=out.sha256.hexdigest(),
        crc32=f"{out.crc32:08x}",
        files=len(planned.members),
        content_bytes=content,
    )


@dataclass(frozen=True)
class PushResult:
    manifest: Manifest
    seconds: float


def push(
    store: ObjectStore,
    folder: Path,
    dest: S3Data,
    *,
    shard_size: int = 256 * 10**6,
    parallel: int = 8,
    log: Callable[[str], None] = print,
    work_dir: Path | None = None,
    images: StoredImages | None = None,
    keep_original: bool = False,
) -> PushResult:
    """Pack `folder` into shards under `dest`, upload them, then the manifest."""
    if keep_original:
        if images is None:
            raise UsageError(
                "--keep-original keeps the originals beside resized images",
                hint="add --max-side N, or leave --keep-original out (the images go as they are)",
            )
        original = S3Data(dest.bucket, dest.key("original"))
        push(
            store,
            folder,
            original,
            shard_size=shard_size,
            parallel=parallel,
            log=log,
            work_dir=work_dir,
        )
    started = time.monotonic()
    skipped: list[str] = []
    classes, eval_split, planned = plan_shards(folder, shard_size, skipped)
    if skipped:
        log(
            f"skipped {len(skipped)} symbolic link(s) (not followed out of the data folder): "
            + ", ".join(skipped[:5])
            + (", ..." if len(skipped) > 5 else "")
        )
    total = sum(m.size for p in planned for m in p.members)
    form = (
        f", training-ready (longer side <= {images.max_side} px, JPEG quality {images.quality})"
        if images is not None
        else ""
    )
    log(
        f"pushing {folder} to {dest.uri}: {sum(len(p.members) for p in planned):,} files, "
        f"{fmt_bytes(total)} in {len(planned)} shards{form}"
    )
    lock = threading.Lock()
    done = [0, 0]  # shards, bytes

    def one(shard: PlannedShard, tmp: Path) -> Shard:
        path = tmp / shard.name
        try:
            entry = write_shard(shard, path, images)
            store.upload(path, dest.key(shard.name), entry.sha256)
        finally:
            path.unlink(missing_ok=True)
        with lock:
            done[0] += 1
            done[1] += entry.size
            elapsed = time.monotonic() - started
            log(
                f"  {shard.name}: {fmt_bytes(entry.size)} ({done[0]}/{len(planned)} shards, "
                f"{fmt_rate(done[1] / elapsed if elapsed > 0 else 0.0)})"
            )
        return entry

    with (
        tempfile.TemporaryDirectory(prefix="spotrun-push-", dir=work_dir) as tmp,
        ThreadPoolExecutor(max_workers=max(1, parallel)) as pool,
    ):
        shards = list(pool.map(lambda p: one(p, Path(tmp)), planned))
    manifest = Manifest(
        name=folder.resolve().name,
        created_at=time.time(),
        classes=classes,
        eval_split=eval_split,
        shards=shards,
        images=images,
    )
    store.put(dest.key(MANIFEST_NAME), manifest.to_json().encode())
    seconds = time.monotonic() - started
    log(f"pushed {dest.uri}: {fmt_bytes(manifest.size)} in {seconds:.1f} s, manifest last")
    return PushResult(manifest, seconds)
