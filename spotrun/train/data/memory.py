"""A batch source over tensors already in memory (small sets, decoded caches)."""

from __future__ import annotations

from collections.abc import Iterator

import torch


class TensorBatches:
    """Shuffled (or not) minibatches over in-memory tensors.

    The order of epoch `e` is a permutation drawn from a generator seeded with (seed, e), so it
    is the same whether or not the process was restarted. With world_size > 1 each rank takes
    every world_size-th sample of that permutation (the distributed-sampler split).
    """

    def __init__(
        self,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        batch_size: int,
        *,
        shuffle: bool,
        seed: int = 0,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if len(inputs) != len(targets):
            raise ValueError("inputs and targets differ in length")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.inputs = inputs
        self.targets = targets
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.rank = rank
        self.world_size = world_size

    def _indices(self, epoch: int) -> torch.Tensor:
        n = len(self.inputs)
        if self.shuffle:
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            order = torch.randperm(n, generator=gen)
        else:
            order = torch.arange(n)
        if self.world_size > 1:
            per_rank = n // self.world_size  # equal shares, so every rank takes as many steps
            order = order[self.rank : per_rank * self.world_size : self.world_size]
        return order

    def __len__(self) -> int:
        n = len(self.inputs) // self.world_size if self.world_size > 1 else len(self.inputs)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = self._indices(epoch)
        for b in range(start, len(self)):
            idx = order[b * self.batch_size : (b + 1) * self.batch_size]
            yield self.inputs[idx], self.targets[idx]
