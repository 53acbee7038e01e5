"""Decode a whole ImageFolder split in worker processes, once, into a uint8 cache.

The cache is two files under the cache folder, named by a key over everything that decides
their content: the split's absolute path, every file's name, size and modification time, and
how the images were decoded. Change any image, or the decode size, and a new cache is built;
the old one is simply no longer read. Files are written to a temporary name and renamed, so a
killed run never leaves a half cache behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from spotrun.errors import UsageError
from spotrun.train.data.augment import channel_stats
from spotrun.train.data.decode import DecodeError, decode_center, decode_exact
from spotrun.train.data.source import SplitIndex

CACHE_FORMAT = 1
CHUNK = 256  # images per worker task: big enough to amortise the hand-over, small for progress

Decoder = Callable[[Path], np.ndarray]


@dataclass(frozen=True)
class DecodePlan:
    """How every image of a split becomes a 3 x height x width uint8 array."""

    height: int
    width: int
    resize: bool  # False: images must already be height x width; True: resize + centre crop
    crop_fraction: float = 1.0

    def decoder(self) -> Decoder:
        if self.resize:
            return partial(decode_center, size=self.height, crop_fraction=self.crop_fraction)
        return partial(decode_exact, shape=(self.height, self.width))

    def describe(self) -> str:
        how = f"resized, crop {self.crop_fraction}" if self.resize else "as stored"
        return f"{self.height}x{self.width} ({how})"


@dataclass(frozen=True)
class DecodedSplit:
    images: np.ndarray  # N x 3 x H x W uint8
    labels: np.ndarray  # N int64
    mean: tuple[float, ...]  # per channel, as fractions of 255
    std: tuple[float, ...]


class _Chunks(Dataset[tuple[np.ndarray | None, str | None]]):
    """Item k: the k-th run of CHUNK images, decoded (or the first error met)."""

    def __init__(self, paths: list[str], decoder: Decoder, shape: tuple[int, int, int]) -> None:
        self.paths = paths
        self.decoder = decoder
        self.shape = shape

    def __len__(self) -> int:
        return -(-len(self.paths) // CHUNK)

    def __getitem__(self, k: int) -> tuple[np.ndarray | None, str | None]:
        part = self.paths[k * CHUNK : (k + 1) * CHUNK]
        out = np.empty((len(part), *self.shape), dtype=np.uint8)
        for i, path in enumerate(part):
            try:
                out[i] = self.decoder(Path(path))
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


def decode_all(index: SplitIndex, plan: DecodePlan, workers: int, what: str) -> np.ndarray:
    """Every image of `index`, decoded by `workers` processes (0: in this one), in order."""
    shape = (3, plan.height, plan.width)
    paths = [str(index.path(i)) for i in range(len(index))]
    out = np.empty((len(paths), *shape), dtype=np.uint8)
    loader: DataLoader[Any] = DataLoader(
        _Chunks(paths, plan.decoder(), shape),
        batch_size=None,
        num_workers=workers,
        collate_fn=_as_is,
        prefetch_factor=4 if workers else None,
    )
    progress = Progress(f"decoding {what}", len(paths))
    done = 0
    for k, (chunk, error) in enumerate(loader):
        if error is not None:
            raise UsageError(error, hint="remove or replace the file, then run again")
        out[k * CHUNK : k * CHUNK + len(chunk)] = chunk
        done += len(chunk)
        progress.update(done)
    return out


def cache_key(index: SplitIndex, plan: DecodePlan) -> str:
    digest = hashlib.sha256()
    head = {"format": CACHE_FORMAT, "root": str(index.root.resolve()), "plan": plan.describe()}
    digest.update(json.dumps(head, sort_keys=True).encode())
    digest.update(json.dumps(index.classes).encode())
    for rel in index.files:
        stat = os.stat(index.root / rel)
        digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:20]


def _write_atomically(path: Path, write: Callable[[Any], None]) -> None:
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
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, lambda fh: fh.write(json.dumps(value).encode()))


def cache_paths(cache_dir: Path, index: SplitIndex, plan: DecodePlan) -> tuple[Path, Path]:
    stem = f"{index.root.name}-{cache_key(index, plan)}"
    folder = cache_dir / "images"
    return folder / f"{stem}.npy", folder / f"{stem}.json"


def decoded_split(
    index: SplitIndex, plan: DecodePlan, *, cache_dir: Path | None, workers: int, what: str
) -> DecodedSplit:
    """The split decoded, read from the cache when it holds it, else decoded and cached."""
    labels = np.asarray(index.labels, dtype=np.int64)
    images_path = meta_path = None
    if cache_dir is not None:
        images_path, meta_path = cache_paths(cache_dir, index, plan)
        if images_path.exists() and meta_path.exists():
            meta = json.loads(meta_path.read_text())
            images = np.load(images_path)
            if images.shape == (len(index), 3, plan.height, plan.width):
                print(f"{what}: {len(index):,} decoded images from {images_path}", flush=True)
                return DecodedSplit(images, labels, tuple(meta["mean"]), tuple(meta["std"]))
    images = decode_all(index, plan, workers, what)
    mean, std = channel_stats(torch.from_numpy(images))
    if images_path is not None and meta_path is not None:
        images_path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(images_path, lambda fh: np.save(fh, images))
        meta = {"root": str(index.root), "count": len(index), "plan": plan.describe()}
        write_json_atomically(meta_path, {**meta, "mean": mean, "std": std})
    return DecodedSplit(images, labels, tuple(mean), tuple(std))
