"""A batch source over decoded uint8 images held in memory (on the training device).

It follows the BatchSource contract: the order of epoch e is fixed by (seed, e) and split
across ranks like TensorBatches, and the random augmentation of batch b comes from a generator
seeded by (seed, e, b, rank), so `batches(e, start=b)` after a restart yields exactly what an
unbroken run would have. It yields normalized float32 batches on `device`.

`size` (None = as decoded) resizes every yielded batch on the device: progressive resizing may
set it between epochs, or an evaluation source use it for a larger test size.

Also here, shared with the streamed sources: where sources run (Placement, Sharding) and the
recipe's normalization and augmentation as an ImagePipeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from spotrun.train.batch_plan import BatchPlan, plan_batches
from spotrun.train.data.augment import IMAGENET_MEAN, IMAGENET_STD, ImagePipeline, batch_generator
from spotrun.train.data.memory import batch_count, epoch_order

if TYPE_CHECKING:
    from spotrun.recipes.base import Recipe


@dataclass(frozen=True)
class Sharding:
    """What a source needs to know about its place in training."""

    seed: int = 0
    rank: int = 0
    world_size: int = 1
    device_batch: int | None = None  # training: the most one micro-batch holds (None: a share)


@dataclass(frozen=True)
class Placement:
    """Where the sources run: this process's rank among world_size, on `device`."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")


def make_pipeline(recipe: Recipe, mean: tuple[float, ...], std: tuple[float, ...]) -> ImagePipeline:
    if recipe.normalize == "imagenet":
        mean, std = IMAGENET_MEAN, IMAGENET_STD
    elif recipe.normalize == "none":
        mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)  # only scaled to 0..1
    a = recipe.augment
    return ImagePipeline(
        mean=mean,
        std=std,
        crop_padding=a.crop_padding,
        padding_mode=a.padding_mode,
        translate=a.translate,
        flip=a.flip,
    )


def sharded_plan(batch_size: int, sharding: Sharding, *, train: bool) -> BatchPlan:
    """Training: `batch_size` is the global batch, planned over the ranks. Evaluation: it is
    per rank, and nothing is accumulated."""
    if train:
        return plan_batches(batch_size, sharding.world_size, sharding.device_batch)
    return BatchPlan(batch_size * sharding.world_size, sharding.world_size)


class ImageBatches:
    """Batches from N x 3 x H x W uint8 images held in memory (on the training device).

    Training batches are this rank's share of each step's global batch (`batch_size`), dealt
    as epoch_order's step_batch split; evaluation batches are `batch_size` per rank.
    """

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
        self.plan = sharded_plan(batch_size, sharding, train=train)
        self.batch_size = self.plan.share if train else batch_size
        self.pipeline = pipeline
        self.train = train
        self.sharding = sharding
        self.size = size
        self.drop_last = train  # equal batches: no tiny last batch for BatchNorm, static shapes

    def __len__(self) -> int:
        if self.train:
            return len(self.images) // self.plan.global_batch
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
            step_batch=self.plan.global_batch if self.train else None,
        ).to(self.device)
        for b in range(start, len(self)):
            idx = order[b * self.batch_size : (b + 1) * self.batch_size]
            generator = batch_generator(sh.seed, epoch, b, sh.rank) if self.train else None
            x = self.pipeline(
                self.images[idx], train=self.train, generator=generator, size=self.size
            )
            yield x, self.labels[idx]
