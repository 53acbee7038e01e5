"""Data for the trainer: batch sources whose order depends only on (seed, epoch).

This package's top level stays free of torch so that launch can check a data path cheaply
(`spotrun.train.data.source`); the loaders import torch themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch


class BatchSource(Protocol):
    """Batches of one epoch, in an order fixed by the epoch number alone (so resume is exact)."""

    def __len__(self) -> int: ...

    def batches(
        self, epoch: int, start: int = 0
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]: ...
