"""From a recipe and an image data set (ImageFolder or CIFAR-10 batches) to batch sources.

Small sets (decoded size up to CACHE_LIMIT_BYTES, or image_cache=on) are decoded once into a
uint8 cache and held in memory on the training device, where crop, translate and flip run on
whole batches. A small archive is read straight into memory and decoded from there; nothing
is unpacked. Large sets (ImageNet) are decoded every epoch by worker processes, with a
random-resized-crop per image while decoding and the flip on the device; a large archive is
unpacked once into the cache folder first.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from spotrun.core.errors import UsageError
from spotrun.train.data import BatchSource, TrainingBatches
from spotrun.train.data.archive import ArchiveSplit, archive_key, read_image_archive, unpacked
from spotrun.train.data.augment import channel_stats, resize_images
from spotrun.train.data.batches import ImageBatches, Placement, Sharding, make_pipeline
from spotrun.train.data.cifar import read_cifar10
from spotrun.train.data.decode import ImageRef
from spotrun.train.data.imagefolder import (
    DecodedSplit,
    DecodePlan,
    ImageList,
    archive_split_key,
    decoded_split,
    folder_key,
    read_cached,
)
from spotrun.train.data.source import DataLocation, SplitIndex, index_split, split_dirs
from spotrun.train.data.streamed import streamed_sources

if TYPE_CHECKING:
    from spotrun.recipes.base import Recipe

CACHE_LIMIT_BYTES = 4 * 2**30  # image_cache=auto holds a set in memory up to this decoded size
ARCHIVE_IN_MEMORY_BYTES = 2 * 2**30  # a larger archive is unpacked rather than read into memory
MAX_AUTO_WORKERS = 8


def decode_workers(recipe: Recipe) -> int:
    if recipe.data_workers is not None:
        return recipe.data_workers
    return min(MAX_AUTO_WORKERS, usable_cpus())


def usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):  # Linux: the CPUs this process may run on
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _check_classes(recipe: Recipe, classes: tuple[str, ...], where: str) -> None:
    if len(classes) != recipe.num_classes:
        raise UsageError(
            f"{where} has {len(classes)} classes but recipe {recipe.name} says "
            f"num_classes={recipe.num_classes}",
            hint=f"--set num_classes={len(classes)}",
        )


def _check_enough(recipe: Recipe, count: int, where: str) -> None:
    if count < recipe.batch_size:
        raise UsageError(
            f"{where} has {count:,} training images, fewer than one step's batch of "
            f"{recipe.batch_size:,}",
            hint="lower batch_size (--set batch_size=N)",
        )


def _in_memory(
    recipe: Recipe, train: DecodedSplit, test: DecodedSplit, where: Placement
) -> tuple[TrainingBatches, BatchSource]:
    """Sources over decoded splits, each already at its final size (train and eval)."""
    pipeline = make_pipeline(recipe, train.mean, train.std)
    sharding = Sharding(recipe.seed, where.rank, where.world_size, recipe.device_batch)
    train_source = ImageBatches(
        torch.from_numpy(train.images),
        torch.from_numpy(train.labels),
        recipe.batch_size,
        pipeline,
        train=True,
        sharding=sharding,
        device=where.device,
    )
    test_source = ImageBatches(
        torch.from_numpy(test.images),
        torch.from_numpy(test.labels),
        recipe.eval_batch(),
        pipeline,
        train=False,
        sharding=sharding,
        device=where.device,
    )
    return train_source, test_source


def _resized(images: np.ndarray, size: int | None, chunk: int = 4096) -> np.ndarray:
    if size is None or images.shape[-2:] == (size, size):
        return images
    parts = [
        resize_images(torch.from_numpy(images[i : i + chunk]), size).numpy()
        for i in range(0, len(images), chunk)
    ]
    return np.concatenate(parts)


def cifar_data(
    recipe: Recipe, source: Path, where: Placement
) -> tuple[TrainingBatches, BatchSource]:
    arrays = read_cifar10(source)
    _check_classes(recipe, arrays.classes, str(source))
    _check_enough(recipe, len(arrays.train_images), str(source))
    train_x = _resized(arrays.train_images, recipe.image_size)
    test_x = _resized(arrays.test_images, recipe.eval_image_size or recipe.image_size)
    mean, std = channel_stats(torch.from_numpy(train_x))
    train = DecodedSplit(train_x, arrays.train_labels, arrays.classes, tuple(mean), tuple(std))
    test = DecodedSplit(test_x, arrays.test_labels, arrays.classes, tuple(mean), tuple(std))
    return _in_memory(recipe, train, test, where)


def _fits_in_memory(recipe: Recipe, parts: list[tuple[int, DecodePlan, ImageRef]]) -> bool:
    """image_cache: on, off, or (auto) whether the decoded splits stay under the limit."""
    if recipe.image_cache != "auto":
        return recipe.image_cache == "on"
    total = 0
    for count, plan, first in parts:
        height, width = plan.shape(first)
        total += 3 * count * height * width
    return total <= CACHE_LIMIT_BYTES


def _from_archive(
    recipe: Recipe, archive: Path, cache_dir: Path, workers: int
) -> tuple[DecodedSplit, DecodedSplit] | None:
    """Both splits decoded straight from a small archive (nothing unpacked), or None if the
    decoded images would not fit in memory."""
    identity = archive_key(archive)
    train_plan = DecodePlan(recipe.image_size)
    eval_plan = DecodePlan(recipe.eval_image_size or recipe.image_size)
    train_key = archive_split_key(identity, "train", train_plan)
    eval_key = archive_split_key(identity, "eval", eval_plan)
    train, test = read_cached(cache_dir, train_key), read_cached(cache_dir, eval_key)
    if train is not None and test is not None:
        print(f"decoded images of {archive.name} from the cache", flush=True)
        return train, test
    train_part, eval_part = read_image_archive(archive)
    if not _fits_in_memory(
        recipe,
        [
            (len(train_part.refs), train_plan, train_part.refs[0]),
            (len(eval_part.refs), eval_plan, eval_part.refs[0]),
        ],
    ):
        return None

    def listing(part: ArchiveSplit) -> Callable[[], ImageList]:
        return lambda: ImageList(part.refs, part.labels, part.classes)

    decode = partial(decoded_split, cache_dir=cache_dir, workers=workers)
    train = decode(train_key, listing(train_part), train_plan, what="train images")
    test = decode(eval_key, listing(eval_part), eval_plan, what="eval images")
    return train, test


def image_folder_data(
    recipe: Recipe, location: DataLocation, cache_dir: Path, where: Placement
) -> tuple[TrainingBatches, BatchSource]:
    assert location.path is not None
    workers = decode_workers(recipe)
    if (
        location.archive
        and recipe.image_cache != "off"
        and location.path.stat().st_size <= ARCHIVE_IN_MEMORY_BYTES
    ):
        decoded = _from_archive(recipe, location.path, cache_dir, workers)
        if decoded is not None:
            return _in_memory_checked(recipe, *decoded, str(location.path), where)
    root = unpacked(location.path, cache_dir) if location.archive else location.path
    train_dir, eval_dir = split_dirs(root)
    train_index = index_split(train_dir)
    eval_index = index_split(eval_dir, list(train_index.classes))
    train_plan = DecodePlan(recipe.image_size)
    eval_plan = DecodePlan(recipe.eval_image_size or recipe.image_size)
    if _fits_in_memory(
        recipe,
        [
            (len(train_index), train_plan, train_index.path(0)),
            (len(eval_index), eval_plan, eval_index.path(0)),
        ],
    ):
        decode = partial(decoded_split, cache_dir=cache_dir, workers=workers)
        train = decode(
            folder_key(train_index, train_plan),
            lambda: _listing(train_index),
            train_plan,
            what="train images",
        )
        test = decode(
            folder_key(eval_index, eval_plan),
            lambda: _listing(eval_index),
            eval_plan,
            what="eval images",
        )
        return _in_memory_checked(recipe, train, test, str(train_dir.parent), where)
    _check_classes(recipe, train_index.classes, str(train_dir))
    _check_enough(recipe, len(train_index), str(train_dir))
    return streamed_sources(recipe, train_index, eval_index, cache_dir, workers, where)


def _listing(index: SplitIndex) -> ImageList:
    return ImageList([index.path(i) for i in range(len(index))], index.labels, index.classes)


def _in_memory_checked(
    recipe: Recipe, train: DecodedSplit, test: DecodedSplit, where_from: str, where: Placement
) -> tuple[TrainingBatches, BatchSource]:
    _check_classes(recipe, train.classes, where_from)
    _check_enough(recipe, len(train.images), where_from)
    return _in_memory(recipe, train, test, where)
