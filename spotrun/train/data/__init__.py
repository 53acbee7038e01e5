"""Data for the trainer: batch sources whose order depends only on (seed, epoch)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import torch


class BatchSource(Protocol):
    """Batches of one epoch, in an order fixed by the epoch number alone (so resume is exact)."""

    def __len__(self) -> int: ...

    def batches(
        self, epoch: int, start: int = 0
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]: ...
