"""Decode a whole split in worker processes, once, into a uint8 cache.

The cache is two files under the cache folder, named by a key over everything that decides
their content: where the images come from (a folder: its absolute path and every file's name,
size and modification time; an archive: its path, size and modification time) and how they were
decoded. Change an image, or the decode size, and a new cache is built; the old one is simply
no longer read. Files are written to a temporary name and renamed, so a killed run never leaves
a half cache behind. The metadata file holds the labels and class names too, so a cache hit
needs neither the folder listing nor the archive.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from spotrun.core.errors import UsageError
from spotrun.train.data.augment import channel_stats
from spotrun.train.data.decode import (
    DecodeError,
    ImageRef,
    decode_center,
    decode_exact,
    image_size,
)
from spotrun.train.data.source import SplitIndex

CACHE_FORMAT = 2
CHUNK = 256  # images per worker task: big enough to amortise the hand-over, small for progress

Decoder = Callable[[ImageRef], np.ndarray]


@dataclass(frozen=True)
class DecodePlan:
    """How every image of a split becomes a 3 x H x W uint8 array.

    size None: as stored (every image must have the first one's size); else the shorter side
    is resized to size / crop_fraction and the centre size x size square kept.
    """

    size: int | None = None
    crop_fraction: float = 1.0

    def describe(self) -> str:
        return "as stored" if self.size is None else f"{self.size} px, crop {self.crop_fraction}"

    def shape(self, first: ImageRef) -> tuple[int, int]:
        return image_size(first) if self.size is None else (self.size, self.size)

    def decoder(self, shape: tuple[int, int]) -> Decoder:
        if self.size is None:
            return partial(decode_exact, shape=shape)
        return partial(decode_center, size=self.size, crop_fraction=self.crop_fraction)


@dataclass(frozen=True)
class ImageList:
    """What a split holds: the images to decode and their labels."""

    refs: Sequence[ImageRef]
    labels: Sequence[int]
    classes: tuple[str, ...]


@dataclass(frozen=True)
class DecodedSplit:
    images: np.ndarray  # N x 3 x H x W uint8
    labels: np.ndarray  # N int64
    classes: tuple[str, ...]
    mean: tuple[float, ...]  # per channel, as fractions of 255
    std: tuple[float, ...]


class _Chunks(Dataset[tuple[np.ndarray | None, str | None]]):
    """Item k: the k-th run of CHUNK images, decoded (or the first error met)."""

    def __init__(
        self, refs: Sequence[ImageRef], decoder: Decoder, shape: tuple[int, int, int]
    ) -> None:
        self.refs = refs
        self.decoder = decoder
        self.shape = shape

    def __len__(self) -> int:
        return -(-len(self.refs) // CHUNK)

    def __getitem__(self, k: int) -> tuple[np.ndarray | None, str | None]:
        part = self.refs[k * CHUNK : (k + 1) * CHUNK]
        out = np.empty((len(part), *self.shape), dtype=np.uint8)
        for i, ref in enumerate(part):
            try:
                out[i] = self.decoder(ref)
            except DecodeError as exc:
                return None, str(exc)
        return out, None


def _as_is(item: Any) -> Any:
    return item


class Progress:
    """Prints `what: done/total` about every tenth of the way, with the rate so far."""

    def __init__(self, what: str, total: int) -> None:
        self.what = what
        self.total = total
        self.started = time.perf_counter()
        self.next_report = max(1, total // 10)

    def update(self, done: int) -> None:
        if done < self.next_report and done < self.total:
            return
        rate = done / max(1e-9, time.perf_counter() - self.started)
        print(f"{self.what}: {done:,}/{self.total:,} images ({rate:,.0f}/s)", flush=True)
        self.next_report = done + max(1, self.total // 10)


def decode_all(refs: Sequence[ImageRef], plan: DecodePlan, workers: int, what: str) -> np.ndarray:
    """Every image of `refs`, decoded by `workers` processes (0: in this one), in order."""
    try:
        height, width = plan.shape(refs[0])
    except DecodeError as exc:
        raise UsageError(str(exc), hint="remove or replace the file, then run again") from exc
    shape = (3, height, width)
    out = np.empty((len(refs), *shape), dtype=np.uint8)
    loader: DataLoader[Any] = DataLoader(
        _Chunks(refs, plan.decoder((height, width)), shape),
        batch_size=None,
        num_workers=workers,
        collate_fn=_as_is,
        prefetch_factor=4 if workers else None,
        generator=torch.Generator(),  # its own: iterating must not draw from the global RNG
    )
    progress = Progress(f"decoding {what}", len(refs))
    done = 0
    for k, (chunk, error) in enumerate(loader):
        if error is not None:
            raise UsageError(error, hint="remove or replace the file, then run again")
        out[k * CHUNK : k * CHUNK + len(chunk)] = chunk
        done += len(chunk)
        progress.update(done)
    return out


# ------------------------------------------------------------------- cache
def folder_key(index: SplitIndex, plan: DecodePlan) -> str:
    digest = hashlib.sha256()
    head = {"format": CACHE_FORMAT, "root": str(index.root.resolve()), "plan": plan.describe()}
    digest.update(json.dumps(head, sort_keys=True).encode())
    digest.update(json.dumps(index.classes).encode())
    for rel in index.files:
        stat = os.stat(index.root / rel)
        digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return f"{index.root.name}-{digest.hexdigest()[:20]}"


def archive_split_key(archive_id: str, split: str, plan: DecodePlan) -> str:
    head = {"format": CACHE_FORMAT, "archive": archive_id, "split": split, "plan": plan.describe()}
    return f"{split}-{hashlib.sha256(json.dumps(head, sort_keys=True).encode()).hexdigest()[:20]}"


def _write_atomically(path: Path, write: Callable[[Any], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json_atomically(path: Path, value: object) -> None:
    _write_atomically(path, lambda fh: fh.write(json.dumps(value).encode()))


def cache_paths(cache_dir: Path, key: str) -> tuple[Path, Path]:
    folder = cache_dir / "images"
    return folder / f"{key}.npy", folder / f"{key}.json"


def read_cached(cache_dir: Path | None, key: str) -> DecodedSplit | None:
    if cache_dir is None:
        return None
    images_path, meta_path = cache_paths(cache_dir, key)
    if not (images_path.exists() and meta_path.exists()):
        return None
    meta = json.loads(meta_path.read_text())
    images = np.load(images_path)
    if meta.get("format") != CACHE_FORMAT or len(images) != len(meta["labels"]):
        return None
    return DecodedSplit(
        images,
        np.asarray(meta["labels"], dtype=np.int64),
        tuple(meta["classes"]),
        tuple(meta["mean"]),
        tuple(meta["std"]),
    )


def decoded_split(
    key: str,
    listing: Callable[[], ImageList],
    plan: DecodePlan,
    *,
    cache_dir: Path | None,
    workers: int,
    what: str,
) -> DecodedSplit:
    """The split decoded: from the cache under `key` if there, else `listing()` decoded."""
    cached = read_cached(cache_dir, key)
    if cached is not None:
        print(f"{what}: {len(cached.images):,} decoded images from the cache ({key})", flush=True)
        return cached
    items = listing()
    images = decode_all(items.refs, plan, workers, what)
    mean, std = channel_stats(torch.from_numpy(images))
    labels = np.asarray(items.labels, dtype=np.int64)
    if cache_dir is not None:
        images_path, meta_path = cache_paths(cache_dir, key)
        _write_atomically(images_path, lambda fh: np.save(fh, images))
        meta = {"format": CACHE_FORMAT, "plan": plan.describe(), "classes": list(items.classes)}
        meta.update(labels=labels.tolist(), mean=mean, std=std)
        write_json_atomically(meta_path, meta)
    return DecodedSplit(images, labels, items.classes, tuple(mean), tuple(std))
