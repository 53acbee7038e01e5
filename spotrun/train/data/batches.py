"""Batch sources over images: decoded uint8 sets held in memory, or files decoded as they go.

Both follow the BatchSource contract: the order of epoch e is fixed by (seed, e) and split
across ranks like TensorBatches, and the random augmentation of batch b comes from a generator
seeded by (seed, e, b, rank), so `batches(e, start=b)` after a restart yields exactly what an
unbroken run would have. Both yield normalized float32 batches on `device`.

`size` (None = as decoded) resizes every yielded batch on the device: progressive resizing may
set it between epochs, and an evaluation source uses it for a larger test size.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from spotrun.errors import UsageError
from spotrun.train.data.augment import ImagePipeline, batch_generator
from spotrun.train.data.decode import (
    EVAL_CROP_FRACTION,
    DecodeError,
    decode_center,
    decode_random_crop,
)
from spotrun.train.data.memory import batch_count, epoch_order


@dataclass(frozen=True)
class Sharding:
    """What a source needs to know about its place in training."""

    seed: int = 0
    rank: int = 0
    world_size: int = 1


class ImageBatches:
    """Batches from N x 3 x H x W uint8 images held in memory (on the training device)."""

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor,
        batch_size: int,
        pipeline: ImagePipeline,
        *,
        train: bool,
        sharding: Sharding = Sharding(),
        size: int | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        if images.dtype != torch.uint8 or images.dim() != 4:
            raise ValueError("images must be an N x C x H x W uint8 tensor")
        if len(images) != len(labels):
            raise ValueError("images and labels differ in length")
        self.device = torch.device(device)
        self.images = images.to(self.device)
        self.labels = labels.to(self.device)
        self.batch_size = batch_size
        self.pipeline = pipeline
        self.train = train
        self.sharding = sharding
        self.size = size
        self.drop_last = train  # equal batches: no tiny last batch for BatchNorm, static shapes

    def __len__(self) -> int:
        return batch_count(
            len(self.images),
            self.batch_size,
            drop_last=self.drop_last,
            world_size=self.sharding.world_size,
        )

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        sh = self.sharding
        order = epoch_order(
            len(self.images),
            shuffle=self.train,
            seed=sh.seed,
            epoch=epoch,
            rank=sh.rank,
            world_size=sh.world_size,
        ).to(self.device)
        for b in range(start, len(self)):
            idx = order[b * self.batch_size : (b + 1) * self.batch_size]
            generator = batch_generator(sh.seed, epoch, b, sh.rank) if self.train else None
            x = self.pipeline(
                self.images[idx], train=self.train, generator=generator, size=self.size
            )
            yield x, self.labels[idx]


# --------------------------------------------------------------- streaming
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
