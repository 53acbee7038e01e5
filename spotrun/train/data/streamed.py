"""Large image sets (ImageNet): decoded from the files every epoch by worker processes.

Each training image gets a random-resized-crop, seeded by (seed, epoch, image index): which
worker decodes it, and whether the run was restarted, changes nothing. By default the worker
cuts and resizes it while decoding (libjpeg scales down first when the crop allows). On a GPU,
for a set pushed training-ready (`data push --max-side`), the worker only decodes the small
stored JPEG and hands it over whole with its crop box; the crops of a batch are cut and
resized on the GPU in one pass (device_crop.py), which leaves each core a decode per image.
Evaluation images are resized and centre-cropped. The flip, normalization and any resize to
a progressive size run on whole batches on the device, as for in-memory sets; the batch order
follows the BatchSource contract.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from spotrun.core.errors import UsageError
from spotrun.datasets.layout import staged_images
from spotrun.train.batch_plan import BatchPlan
from spotrun.train.data import BatchSource, TrainingBatches
from spotrun.train.data.augment import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    ImagePipeline,
    batch_generator,
    channel_stats,
)
from spotrun.train.data.batches import Placement, Sharding, make_pipeline, sharded_plan
from spotrun.train.data.decode import (
    EVAL_CROP_FRACTION,
    DecodeError,
    decode_center,
    decode_for_device_crop,
    decode_random_crop,
)
from spotrun.train.data.device_crop import Box, crop_resize, pad_batch
from spotrun.train.data.imagefolder import (
    DecodePlan,
    cache_paths,
    decode_all,
    folder_key,
    write_json_atomically,
)
from spotrun.train.data.memory import batch_count, epoch_order
from spotrun.train.data.source import TRAIN_SPLIT, SplitIndex, index_split

if TYPE_CHECKING:
    from spotrun.datasets.feed import ShardFeed
    from spotrun.recipes.base import Recipe

# (image, label, error, crop box): the box only when the crop is left to the device
Sample = tuple[np.ndarray | None, int, str | None, Box | None]
# (images, labels, error, crops): crops, when the device cuts them, is (boxes N x 4, image
# shapes N x 2) for the N whole images on the images' canvas
Crops = tuple[torch.Tensor, torch.Tensor]
Collated = tuple[torch.Tensor | None, torch.Tensor, str | None, Crops | None]


class _Samples(Dataset[Sample]):
    """Item (epoch, i): image i decoded at `size`, randomly cropped when training.

    The crop of image i in epoch e depends on (seed, e, i) alone, so which worker decodes it,
    and whether the run was restarted, makes no difference.
    """

    def __init__(
        self,
        paths: list[str],
        labels: list[int],
        *,
        size: int,
        train: bool,
        crop_scale: tuple[float, float],
        seed: int,
        crop_on_device: bool = False,
    ) -> None:
        self.paths = paths
        self.crop_on_device = crop_on_device and train
        self.labels = labels
        self.size = size
        self.train = train
        self.crop_scale = crop_scale
        self.seed = seed

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key: tuple[int, int] | tuple[int, int, str, int]) -> Sample:
        # (epoch, i), or (epoch, i, path, label) from a set still being staged (_FeedBatches)
        epoch, i = key[0], key[1]
        path = Path(self.paths[i]) if len(key) == 2 else Path(key[2])
        label = self.labels[i] if len(key) == 2 else int(key[3])
        box: Box | None = None
        try:
            if self.crop_on_device:
                rng = np.random.default_rng([self.seed, epoch, i])
                image, box = decode_for_device_crop(path, self.size, self.crop_scale, rng)
            elif self.train:
                rng = np.random.default_rng([self.seed, epoch, i])
                image = decode_random_crop(path, self.size, self.crop_scale, rng)
            else:
                image = decode_center(path, self.size, EVAL_CROP_FRACTION)
        except DecodeError as exc:
            return None, label, str(exc), None
        return image, label, None, box


def _collate(samples: list[Sample]) -> Collated:
    labels = torch.tensor([label for _, label, _, _ in samples], dtype=torch.int64)
    for _, _, error, _ in samples:
        if error is not None:
            return None, labels, error, None
    images = [image for image, _, _, _ in samples if image is not None]
    boxes = [box for _, _, _, box in samples if box is not None]
    if boxes:  # whole images of several sizes, cropped on the device
        canvas, shapes = pad_batch(images)
        crops = (torch.tensor(boxes, dtype=torch.float32), torch.from_numpy(shapes))
        return torch.from_numpy(canvas), labels, None, crops
    return torch.from_numpy(np.stack(images)), labels, None, None


class _EpochBatches:
    """Batches of (epoch, index) keys for the DataLoader; set `epoch` and `start` first.

    It holds numbers only, not its source, so no reference cycle keeps worker processes alive
    after the source is dropped.
    """

    def __init__(
        self, n: int, plan: BatchPlan, batches: int, *, train: bool, sharding: Sharding
    ) -> None:
        self.n = n
        self.plan = plan
        self.count = batches
        self.train = train
        self.sharding = sharding
        self.epoch = 0
        self.start = 0

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        sh = self.sharding
        order = epoch_order(
            self.n,
            shuffle=self.train,
            seed=sh.seed,
            epoch=self.epoch,
            rank=sh.rank,
            world_size=sh.world_size,
            step_batch=self.plan.global_batch if self.train else None,
        ).tolist()
        size = self.plan.share
        for b in range(self.start, self.count):
            yield [(self.epoch, i) for i in order[b * size : (b + 1) * size]]

    def __len__(self) -> int:
        return self.count - self.start


class _FeedBatches:
    """Batches of (epoch, index, path, label) keys over a set whose training shards are still
    arriving (a recipe's stream_data): epoch 0 reads the shards in manifest order, each in a
    seeded shuffle, waiting for each shard's marker before its first image; later epochs wait
    for the whole set and shuffle all of it. Both orders are fixed by the seed alone, so a
    restart at (epoch, batch) yields what an unbroken run would have. Under torchrun every rank
    walks the same order and takes its contiguous part of every step's global batch (as
    epoch_order's step_batch splits), so each rank waits only for the shards its own images
    are in."""

    def __init__(
        self, feed: ShardFeed, classes: list[str], plan: BatchPlan, batches: int, sh: Sharding
    ) -> None:
        self.feed = feed
        self.label_of = {name: label for label, name in enumerate(classes)}
        self.classes = classes
        self.plan = plan
        self.count = batches
        self.seed = sh.seed
        self.rank, self.world_size = sh.rank, sh.world_size
        self.epoch = 0
        self.start = 0
        self._everything: list[tuple[str, int]] | None = None

    def _key(self, rel: str) -> tuple[str, int]:
        parts = rel.split("/")
        if len(parts) != 3 or parts[1] not in self.label_of:
            raise UsageError(f"{rel}: not a file of a known class folder (split/class/file)")
        return str(self.feed.root / rel), self.label_of[parts[1]]

    def _first_epoch(self) -> Iterator[tuple[str, int]]:
        """This rank's images of epoch 0: its part of every step's global batch in the order
        every rank shares; a shard none of them falls in is not waited for."""
        plan, at = self.plan, 0  # at: position in the shared order of the shard's first image
        for k, shard in enumerate(self.feed.train_shards):
            mine = [
                j
                for j in range(shard.files)
                if (at + j) % plan.global_batch // plan.share == self.rank
            ]
            at += shard.files
            if not mine:
                continue
            names = sorted(self.feed.wait(shard))
            order = np.random.default_rng([self.seed, k]).permutation(len(names))
            for j in mine:
                yield self._key(names[order[j]])

    def _all(self) -> list[tuple[str, int]]:
        if self._everything is None:
            self.feed.wait_all()
            index = index_split(self.feed.root / TRAIN_SPLIT, self.classes)
            self._everything = [(str(index.path(i)), index.labels[i]) for i in range(len(index))]
        return self._everything

    def __iter__(self) -> Iterator[list[tuple[int, int, str, int]]]:
        if self.epoch == 0:
            stream: Iterator[tuple[str, int]] = self._first_epoch()
        else:
            every = self._all()
            picks = epoch_order(
                len(every),
                shuffle=True,
                seed=self.seed,
                epoch=self.epoch,
                rank=self.rank,
                world_size=self.world_size,
                step_batch=self.plan.global_batch,
            )
            stream = (every[i] for i in picks.tolist())
        batch: list[tuple[int, int, str, int]] = []
        b = 0
        for i, (path, label) in enumerate(stream):
            batch.append((self.epoch, i, path, label))
            if len(batch) == self.plan.share:
                if b >= self.start:
                    yield batch
                b += 1
                batch = []
                if b >= self.count:
                    return

    def __len__(self) -> int:
        return self.count - self.start


class StreamedImageBatches:
    """Batches decoded from image files every epoch by `workers` processes (large sets)."""

    def __init__(
        self,
        paths: list[str],
        labels: list[int],
        batch_size: int,
        pipeline: ImagePipeline,
        *,
        train: bool,
        decode_size: int,
        crop_scale: tuple[float, float] = (0.08, 1.0),
        workers: int = 0,
        sharding: Sharding = Sharding(),
        size: int | None = None,
        device: torch.device | str = "cpu",
        feed: tuple[ShardFeed, list[str]] | None = None,  # (a set still arriving, its classes)
        crop_on_device: bool = False,
    ) -> None:
        self.samples = _Samples(
            paths,
            labels,
            size=decode_size,
            train=train,
            crop_scale=crop_scale,
            seed=sharding.seed,
            crop_on_device=crop_on_device,
        )
        self.decode_size = decode_size
        self._n = feed[0].train_files if feed is not None else len(paths)
        # training: batch_size is the global batch, each batch here this rank's share of it
        self.plan = sharded_plan(batch_size, sharding, train=train)
        self.batch_size = self.plan.share if train else batch_size
        self.pipeline = pipeline
        self.train = train
        self.sharding = sharding
        self.size = size
        self.device = torch.device(device)
        self.drop_last = train
        self._sampler: _EpochBatches | _FeedBatches
        if feed is not None:
            if not train:
                raise ValueError("a set still being staged feeds training only")
            self._sampler = _FeedBatches(feed[0], feed[1], self.plan, len(self), sharding)
        else:
            self._sampler = _EpochBatches(
                len(paths), self.plan, len(self), train=train, sharding=sharding
            )
        self._loader: DataLoader[Any] = DataLoader(
            self.samples,
            batch_sampler=self._sampler,
            num_workers=workers,
            collate_fn=_collate,
            pin_memory=self.device.type == "cuda",
            persistent_workers=workers > 0,
            prefetch_factor=4 if workers else None,
            generator=torch.Generator(),  # its own: iterating must not draw from the global RNG
        )

    def __len__(self) -> int:
        if self.train:
            return self._n // self.plan.global_batch
        return batch_count(
            self._n,
            self.batch_size,
            drop_last=self.drop_last,
            world_size=self.sharding.world_size,
        )

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        sh = self.sharding
        self._sampler.epoch, self._sampler.start = epoch, start
        for b, (images, labels, error, crops) in enumerate(self._loader, start=start):
            if error is not None or images is None:
                raise UsageError(str(error), hint="remove or replace the file, then run again")
            x = images.to(self.device, non_blocking=True)
            if crops is not None:
                x = crop_resize(x, crops[0], crops[1], self.decode_size)
            generator = batch_generator(sh.seed, epoch, b, sh.rank) if self.train else None
            x = self.pipeline(x, train=self.train, generator=generator, size=self.size)
            yield x, labels.to(self.device, non_blocking=True)


def crops_on_device(dataset: Path, device: torch.device) -> bool:
    """Whether the training crops are cut on the device: on a GPU, for a set pushed
    training-ready (small whole images cost the host-to-GPU copy no more than crops would)."""
    return device.type == "cuda" and staged_images(dataset) is not None


def _paths(index: SplitIndex) -> list[str]:
    return [str(index.path(i)) for i in range(len(index))]


def _eval_source(
    recipe: Recipe,
    eval_index: SplitIndex,
    pipeline: ImagePipeline,
    workers: int,
    sharding: Sharding,
    where: Placement,
) -> StreamedImageBatches:
    """The evaluation split, read whole and in order, as every streamed recipe evaluates."""
    decode_size = recipe.eval_image_size or recipe.image_size
    assert decode_size is not None  # both callers refuse a recipe without image_size first
    return StreamedImageBatches(
        _paths(eval_index),
        list(eval_index.labels),
        recipe.eval_batch(),
        pipeline,
        train=False,
        decode_size=decode_size,
        workers=workers,
        sharding=sharding,
        device=where.device,
    )


def streamed_sources(
    recipe: Recipe,
    train_index: SplitIndex,
    eval_index: SplitIndex,
    cache_dir: Path,
    workers: int,
    where: Placement,
) -> tuple[TrainingBatches, BatchSource]:
    if recipe.image_size is None:
        raise UsageError(
            f"recipe {recipe.name}: images decoded every epoch need image_size",
            hint="--set image_size=224 (or image_cache=on for a set that fits in memory)",
        )
    mean: tuple[float, ...] = IMAGENET_MEAN  # replaced unless normalize=dataset asks otherwise
    std: tuple[float, ...] = IMAGENET_STD
    if recipe.normalize == "dataset":
        mean, std = sample_stats(train_index, recipe.image_size, cache_dir, workers)
    pipeline = make_pipeline(recipe, mean, std)
    sharding = Sharding(recipe.seed, where.rank, where.world_size, recipe.device_batch)

    train = StreamedImageBatches(
        _paths(train_index),
        list(train_index.labels),
        recipe.batch_size,
        pipeline,
        train=True,
        decode_size=recipe.image_size,
        crop_scale=recipe.augment.crop_scale,
        workers=workers,
        sharding=sharding,
        device=where.device,
        crop_on_device=crops_on_device(train_index.root.parent, where.device),
    )
    return train, _eval_source(recipe, eval_index, pipeline, workers, sharding, where)


def fed_sources(
    recipe: Recipe, feed: ShardFeed, workers: int, where: Placement
) -> tuple[TrainingBatches, BatchSource]:
    """Sources over a set still being staged: its evaluation split is in place, its training
    shards are read as they arrive (spotrun.datasets.feed)."""
    if recipe.image_size is None:
        raise UsageError(
            f"recipe {recipe.name}: stream_data decodes images every epoch: it needs image_size",
            hint="--set image_size=224",
        )
    classes = list(feed.manifest.classes)
    if len(classes) != recipe.num_classes or feed.train_files < recipe.batch_size:
        raise UsageError(
            f"{feed.root} has {len(classes)} classes and {feed.train_files:,} training images; "
            f"recipe {recipe.name} says num_classes={recipe.num_classes}, batch_size="
            f"{recipe.batch_size}",
            hint=f"--set num_classes={len(classes)} (and a batch_size up to the image count)",
        )
    eval_index = index_split(feed.root / feed.manifest.eval_split, classes)
    pipeline = make_pipeline(recipe, IMAGENET_MEAN, IMAGENET_STD)  # normalize=dataset refused
    sharding = Sharding(recipe.seed, where.rank, where.world_size, recipe.device_batch)
    train = StreamedImageBatches(
        [],
        [],
        recipe.batch_size,
        pipeline,
        train=True,
        decode_size=recipe.image_size,
        crop_scale=recipe.augment.crop_scale,
        workers=workers,
        sharding=sharding,
        device=where.device,
        feed=(feed, classes),
        crop_on_device=where.device.type == "cuda" and feed.manifest.images is not None,
    )
    return train, _eval_source(recipe, eval_index, pipeline, workers, sharding, where)


STATS_SAMPLE = 1000  # images whose channel statistics stand for a streamed set


def sample_stats(
    index: SplitIndex, size: int, cache_dir: Path, workers: int
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Channel mean/std of a fixed sample of the split, decoded once and remembered."""
    rng = np.random.default_rng(0)
    picks = np.sort(rng.choice(len(index), size=min(STATS_SAMPLE, len(index)), replace=False))
    sample = SplitIndex(
        index.root,
        index.classes,
        tuple(index.files[i] for i in picks),
        tuple(index.labels[i] for i in picks),
    )
    plan = DecodePlan(size)
    _, meta_path = cache_paths(cache_dir, "stats-" + folder_key(sample, plan))
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        return tuple(meta["mean"]), tuple(meta["std"])
    images = decode_all([sample.path(i) for i in range(len(sample))], plan, workers, "stats sample")
    mean, std = channel_stats(torch.from_numpy(images))
    write_json_atomically(meta_path, {"root": str(index.root), "mean": mean, "std": std})
    return tuple(mean), tuple(std)
