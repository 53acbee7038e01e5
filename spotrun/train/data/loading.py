"""From a recipe's `data` setting to its train and eval batch sources."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from spotrun.core.config import load_settings
from spotrun.core.lazy import lazy_module
from spotrun.datasets.prepare import local_data, stage_s3_streaming
from spotrun.datasets.spec import is_remote, parse_s3
from spotrun.train.data import BatchSource, TrainingBatches
from spotrun.train.data.batches import Placement
from spotrun.train.data.digits import load_digits_split
from spotrun.train.data.memory import TensorBatches
from spotrun.train.data.source import resolve_data
from spotrun.train.data.text import text_data

if TYPE_CHECKING:
    from spotrun.recipes.base import Recipe
    from spotrun.train.data import images, streamed
else:  # PIL (~50 ms): only image data sets decode with it
    images = lazy_module("spotrun.train.data.images")
    streamed = lazy_module("spotrun.train.data.streamed")


def load_data(
    recipe: Recipe,
    *,
    rank: int = 0,
    world_size: int = 1,
    device: torch.device | str | None = None,
) -> tuple[TrainingBatches, BatchSource]:
    """Train and eval sources for this process (rank of world_size): each training batch is
    this rank's share of a step's global batch (recipe.batch_size), dealt in the global order.

    `device` is where image batches are assembled and augmented (pass the trainer's device so
    a cached set lives on the GPU); None means the CPU, and the trainer moves batches over.
    """
    if recipe.text is not None:
        return text_data(recipe, rank=rank, world_size=world_size)
    if recipe.data == "digits":
        train_x, train_y, test_x, test_y = load_digits_split()
        train = TensorBatches(
            train_x,
            train_y,
            recipe.batch_size,
            shuffle=True,
            seed=recipe.seed,
            rank=rank,
            world_size=world_size,
            device_batch=recipe.device_batch,
        )
        test = TensorBatches(test_x, test_y, 512, shuffle=False, rank=rank, world_size=world_size)
        return train, test

    settings = load_settings()
    data = recipe.data
    where = Placement(rank, world_size, torch.device(device or "cpu"))
    if recipe.stream_data and data.startswith("s3://"):
        # training starts on the first shards while the rest arrive (every rank)
        feed = stage_s3_streaming(parse_s3(data), settings.home)
        return streamed.fed_sources(recipe, feed, images.decode_workers(recipe), where)
    if is_remote(data):  # s3:// or snapshot:: staged onto this machine first
        data = local_data(data, settings.home)
    location = resolve_data(data, settings.data_path)
    if location.kind == "cifar-batches":
        assert location.path is not None
        return images.cifar_data(recipe, location.path, where)
    return images.image_folder_data(recipe, location, settings.cache_dir, where)
