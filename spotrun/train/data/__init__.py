"""Data for the trainer: batch sources whose order depends only on (seed, epoch).

This package's top level stays free of torch so that launch can check a data path cheaply
(`spotrun.train.data.source`); the loaders import torch themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

    from spotrun.train.batch_plan import BatchPlan


class BatchSource(Protocol):
    """Batches of one epoch, in an order fixed by the epoch number alone (so resume is exact)."""

    def __len__(self) -> int: ...

    def batches(
        self, epoch: int, start: int = 0
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]: ...


class TrainingBatches(BatchSource, Protocol):
    """Training batches: each one this rank's share of a step's global batch, dealt in the
    global order (so the steps are the same on any number of processes), and the plan that
    says how many micro-batches the trainer cuts each share into."""

    plan: BatchPlan
