"""A batch source over tensors already in memory (small sets, decoded caches)."""

from __future__ import annotations

from collections.abc import Iterator

import torch


def epoch_order(
    n: int,
    *,
    shuffle: bool,
    seed: int,
    epoch: int,
    rank: int = 0,
    world_size: int = 1,
    equal_shares: bool = True,
) -> torch.Tensor:
    """The sample indices one rank visits in `epoch`: fixed by (seed, epoch), never by history.

    Shuffled, it is a permutation drawn from a generator seeded with (seed, epoch). With
    world_size > 1 each rank takes every world_size-th entry (the distributed-sampler split):
    with `equal_shares` all ranks the same number, so they take as many steps (what DDP
    training needs); without, every sample exactly once (what evaluation needs).
    """
    if shuffle:
        gen = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        order = torch.randperm(n, generator=gen)
    else:
        order = torch.arange(n)
    if world_size > 1:
        end = n // world_size * world_size if equal_shares else n
        order = order[rank:end:world_size]
    return order


def batch_count(
    n: int,
    batch_size: int,
    *,
    drop_last: bool,
    world_size: int = 1,
    rank: int = 0,
    equal_shares: bool = True,
) -> int:
    if world_size == 1:
        per_rank = n
    elif equal_shares:
        per_rank = n // world_size
    else:
        per_rank = len(range(rank, n, world_size))
    return per_rank // batch_size if drop_last else -(-per_rank // batch_size)


class TensorBatches:
    """Shuffled (or not) minibatches over in-memory tensors.

    The order of epoch `e` is a permutation drawn from a generator seeded with (seed, e), so it
    is the same whether or not the process was restarted. With world_size > 1 each rank takes
    every world_size-th sample of that permutation (the distributed-sampler split). Resume
    needs nothing more than (epoch, batch index): the split depends on neither.

    `equal_shares` (default: when shuffling, i.e. for training) drops the last few samples so
    every rank takes as many steps, which DDP needs; without it (evaluation) every sample is
    seen exactly once and shares differ by at most one.
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
        equal_shares: bool | None = None,
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
        self.equal_shares = shuffle if equal_shares is None else equal_shares

    def _indices(self, epoch: int) -> torch.Tensor:
        return epoch_order(
            len(self.inputs),
            shuffle=self.shuffle,
            seed=self.seed,
            epoch=epoch,
            rank=self.rank,
            world_size=self.world_size,
            equal_shares=self.equal_shares,
        )

    def __len__(self) -> int:
        return batch_count(
            len(self.inputs),
            self.batch_size,
            drop_last=self.drop_last,
            world_size=self.world_size,
            rank=self.rank,
            equal_shares=self.equal_shares,
        )

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = self._indices(epoch)
        for b in range(start, len(self)):
            idx = order[b * self.batch_size : (b + 1) * self.batch_size]
            yield self.inputs[idx], self.targets[idx]
