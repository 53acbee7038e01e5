"""Large image sets (ImageNet): decoded from the files every epoch by worker processes.

Each training image gets a random-resized-crop while it is decoded (libjpeg scales down first
when the crop allows), seeded by (seed, epoch, image index): which worker decodes it, and
whether the run was restarted, changes nothing. Evaluation images are resized and centre-
cropped. The flip, normalization and any resize to a progressive size run on whole batches on
the device, as for in-memory sets; the batch order follows the BatchSource contract.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from spotrun.errors import UsageError
from spotrun.train.data import BatchSource
from spotrun.train.data.augment import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    ImagePipeline,
    batch_generator,
    channel_stats,
)
from spotrun.train.data.batches import Placement, Sharding, make_pipeline
from spotrun.train.data.decode import (
    EVAL_CROP_FRACTION,
    DecodeError,
    decode_center,
    decode_random_crop,
)
from spotrun.train.data.imagefolder import (
    DecodePlan,
    cache_paths,
    decode_all,
    folder_key,
    write_json_atomically,
)
from spotrun.train.data.memory import batch_count, epoch_order
from spotrun.train.data.source import SplitIndex

if TYPE_CHECKING:
    from spotrun.recipes.base import Recipe

Sample = tuple[np.ndarray | None, int, str | None]


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
    ) -> None:
        self.paths = paths
        self.labels = labels
        self.size = size
        self.train = train
        self.crop_scale = crop_scale
        self.seed = seed

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key: tuple[int, int]) -> Sample:
        epoch, i = key
        path = Path(self.paths[i])
        try:
            if self.train:
                rng = np.random.default_rng([self.seed, epoch, i])
                image = decode_random_crop(path, self.size, self.crop_scale, rng)
            else:
                image = decode_center(path, self.size, EVAL_CROP_FRACTION)
        except DecodeError as exc:
            return None, self.labels[i], str(exc)
        return image, self.labels[i], None


def _collate(samples: list[Sample]) -> tuple[torch.Tensor | None, torch.Tensor, str | None]:
    labels = torch.tensor([label for _, label, _ in samples], dtype=torch.int64)
    for _, _, error in samples:
        if error is not None:
            return None, labels, error
    images = np.stack([image for image, _, _ in samples if image is not None])
    return torch.from_numpy(images), labels, None


class _EpochBatches:
    """Batches of (epoch, index) keys for the DataLoader; set `epoch` and `start` first.

    It holds numbers only, not its source, so no reference cycle keeps worker processes alive
    after the source is dropped.
    """

    def __init__(
        self, n: int, batch_size: int, batches: int, *, train: bool, sharding: Sharding
    ) -> None:
        self.n = n
        self.batch_size = batch_size
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
        ).tolist()
        size = self.batch_size
        for b in range(self.start, self.count):
            yield [(self.epoch, i) for i in order[b * size : (b + 1) * size]]

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
    ) -> None:
        self.samples = _Samples(
            paths, labels, size=decode_size, train=train, crop_scale=crop_scale, seed=sharding.seed
        )
        self.batch_size = batch_size
        self.pipeline = pipeline
        self.train = train
        self.sharding = sharding
        self.size = size
        self.device = torch.device(device)
        self.drop_last = train
        self._sampler = _EpochBatches(
            len(paths), batch_size, len(self), train=train, sharding=sharding
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
        return batch_count(
            len(self.samples),
            self.batch_size,
            drop_last=self.drop_last,
            world_size=self.sharding.world_size,
        )

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        sh = self.sharding
        self._sampler.epoch, self._sampler.start = epoch, start
        for b, (images, labels, error) in enumerate(self._loader, start=start):
            if error is not None or images is None:
                raise UsageError(str(error), hint="remove or replace the file, then run again")
            x = images.to(self.device, non_blocking=True)
            generator = batch_generator(sh.seed, epoch, b, sh.rank) if self.train else None
            x = self.pipeline(x, train=self.train, generator=generator, size=self.size)
            yield x, labels.to(self.device, non_blocking=True)


def streamed_sources(
    recipe: Recipe,
    train_index: SplitIndex,
    eval_index: SplitIndex,
    cache_dir: Path,
    workers: int,
    where: Placement,
) -> tuple[BatchSource, BatchSource]:
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
    sharding = Sharding(recipe.seed, where.rank, where.world_size)

    def paths(index: SplitIndex) -> list[str]:
        return [str(index.path(i)) for i in range(len(index))]

    train = StreamedImageBatches(
        paths(train_index),
        list(train_index.labels),
        recipe.batch_size,
        pipeline,
        train=True,
        decode_size=recipe.image_size,
        crop_scale=recipe.augment.crop_scale,
        workers=workers,
        sharding=sharding,
        device=where.device,
    )
    test = StreamedImageBatches(
        paths(eval_index),
        list(eval_index.labels),
        recipe.eval_batch_size or recipe.batch_size,
        pipeline,
        train=False,
        decode_size=recipe.eval_image_size or recipe.image_size,
        workers=workers,
        sharding=sharding,
        device=where.device,
    )
    return train, test


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
