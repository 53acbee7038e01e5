"""How one optimizer step's global batch is made on the processes a run gets.

A recipe states its global batch: the samples every optimizer step averages its gradient
over, whatever the hardware. Each of the run's processes takes an equal share of it, and a
share larger than a device computes at once (the recipe's `device_batch`) is cut into equal
micro-batches whose gradients are accumulated before the step. So 1,024 images per step are
8 GPUs x 128, or 4 GPUs x 128 x 2 accumulated, and both train the same model on the same
batches in the same order (the data sources deal each step's samples in the global order,
split per process, then per micro-batch).

No torch here: `spotrun recipes show` and launch checks describe plans without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spotrun.core.errors import UsageError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class BatchPlan:
    """One step: `global_batch` samples over `world_size` processes, each process's share in
    `accumulation` micro-batches of `micro_batch`."""

    global_batch: int
    world_size: int = 1
    accumulation: int = 1

    @property
    def share(self) -> int:
        """Samples of each step one process takes."""
        return self.global_batch // self.world_size

    @property
    def micro_batch(self) -> int:
        return self.share // self.accumulation

    def rows(self, rank: int) -> slice:
        """Which of a step's global-batch positions `rank` takes: a contiguous 1/world_size."""
        return slice(rank * self.share, (rank + 1) * self.share)

    def made_of(self, device: str = "process") -> str:
        """'4 GPUs x 128 x 2 accumulated' (device: 'GPU' or 'process')."""
        plural = "es" if device.endswith("s") else "s"
        devices = f"1 {device}" if self.world_size == 1 else f"{self.world_size} {device}{plural}"
        made = f"{devices} x {self.micro_batch:,}"
        return made + (f" x {self.accumulation} accumulated" if self.accumulation > 1 else "")

    def describe(self, unit: str = "samples", device: str = "process") -> str:
        """'1,024 images per step = 4 GPUs x 128 x 2 accumulated'."""
        return f"{self.global_batch:,} {unit} per step = {self.made_of(device)}"


def plan_batches(
    global_batch: int, world_size: int = 1, device_batch: int | None = None
) -> BatchPlan:
    """The plan for `world_size` processes: the fewest micro-batches per process that keep each
    at most `device_batch` (None: no limit) and all of one size, so every sample weighs alike."""
    if global_batch < 1 or world_size < 1:
        raise UsageError(f"a batch of {global_batch} on {world_size} processes is not a plan")
    if global_batch % world_size:
        raise UsageError(
            f"the global batch of {global_batch:,} (batch_size) does not split evenly over "
            f"{world_size} processes",
            hint=f"use a process count that divides {global_batch:,}, or --set batch_size=N "
            f"with N a multiple of {world_size}",
        )
    share = global_batch // world_size
    cap = share if device_batch is None else max(1, min(device_batch, share))
    accumulation = next(a for a in range(-(-share // cap), share + 1) if share % a == 0)
    return BatchPlan(global_batch, world_size, accumulation)


def split_micro_batches(
    inputs: torch.Tensor, targets: torch.Tensor, count: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A process's share of a step cut into `count` micro-batches, in order. Targets may hold
    several entries per input row (a language model's flattened (B*T,) next tokens)."""
    if count == 1:
        return [(inputs, targets)]
    per_row = len(targets) // max(1, len(inputs))
    parts = []
    at = 0
    for chunk in inputs.tensor_split(count):
        size = len(chunk) * per_row
        parts.append((chunk, targets[at : at + size]))
        at += size
    return parts
