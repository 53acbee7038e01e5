"""A batch source over tensors already in memory (small sets, decoded caches)."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from spotrun.train.batch_plan import BatchPlan, plan_batches


def epoch_order(
    n: int,
    *,
    shuffle: bool,
    seed: int,
    epoch: int,
    rank: int = 0,
    world_size: int = 1,
    equal_shares: bool = True,
    step_batch: int | None = None,
) -> torch.Tensor:
    """The sample indices one rank visits in `epoch`: fixed by (seed, epoch), never by history.

    Shuffled, it is a permutation drawn from a generator seeded with (seed, epoch).

    Training (`step_batch`, the global batch): step b is entries [b * step_batch, (b + 1) *
    step_batch) of that order whatever the world size, and each rank takes a contiguous
    1/world_size of every step, so the steps and their order do not depend on how many
    processes train; a last partial step is dropped.

    Evaluation (no step_batch): with world_size > 1 each rank takes every world_size-th entry:
    with `equal_shares` all ranks the same number; without, every sample exactly once.
    """
    if shuffle:
        gen = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        order = torch.randperm(n, generator=gen)
    else:
        order = torch.arange(n)
    if step_batch is not None:
        steps, share = n // step_batch, step_batch // world_size
        whole = order[: steps * step_batch].view(steps, world_size, share)
        return whole[:, rank].reshape(-1)
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
    """Batches of one rank in an epoch (evaluation's split; training's is n // global batch)."""
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
    is the same whether or not the process was restarted. Resume needs nothing more than
    (epoch, batch index): the split depends on neither.

    Shuffled (training), `batch_size` is the global batch: every step takes the next
    batch_size samples of the permutation, this rank a contiguous 1/world_size of them (its
    share, which the trainer cuts into `plan.accumulation` micro-batches of at most
    `device_batch`); a last partial step is dropped, so every rank takes as many steps and
    every step weighs its samples alike, on any number of processes.

    Not shuffled (evaluation), `batch_size` is per rank and each rank takes every
    world_size-th sample; `equal_shares` (default off) drops the last few so all ranks take as
    many batches, else every sample is seen exactly once.
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
        equal_shares: bool = False,
        device_batch: int | None = None,
    ) -> None:
        if len(inputs) != len(targets):
            raise ValueError("inputs and targets differ in length")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.inputs = inputs
        self.targets = targets
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.rank = rank
        self.world_size = world_size
        self.equal_shares = equal_shares
        self.plan = (
            plan_batches(batch_size, world_size, device_batch)
            if shuffle
            else BatchPlan(batch_size * world_size, world_size)
        )
        self.batch_size = self.plan.share  # what one rank takes per batch

    def _indices(self, epoch: int) -> torch.Tensor:
        return epoch_order(
            len(self.inputs),
            shuffle=self.shuffle,
            seed=self.seed,
            epoch=epoch,
            rank=self.rank,
            world_size=self.world_size,
            equal_shares=self.equal_shares,
            step_batch=self.plan.global_batch if self.shuffle else None,
        )

    def __len__(self) -> int:
        if self.shuffle:
            return len(self.inputs) // self.plan.global_batch
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
