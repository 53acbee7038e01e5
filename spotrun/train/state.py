"""The trainer's state: what algorithms may read and change at each event.

Kept small on purpose. Anything a method needs beyond this lives in the method itself (and in
its own state_dict for checkpoints), never as a new field here.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from spotrun.train.data import BatchSource
from spotrun.train.wrapping import without_ddp


@dataclass
class State:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    max_epochs: int
    steps_per_epoch: int
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    rank: int = 0
    world_size: int = 1
    # The training batches, for methods that derive something from the data at INIT (the
    # patch-whitening stem); nothing reads it during the loop.
    train_data: BatchSource | None = None

    # Position. `epoch` counts completed epochs; `batch_index` is the next batch of this epoch.
    epoch: int = 0
    step: int = 0
    batch_index: int = 0

    # The current batch and what became of it; methods may replace any of these.
    inputs: torch.Tensor | None = None
    targets: torch.Tensor | None = None
    outputs: torch.Tensor | None = None
    loss: torch.Tensor | None = None
    # Set by a method that takes the optimizer step itself (the fp16 grad scaler, which also
    # drops steps whose gradients overflowed); the trainer then does not call optimizer.step().
    skip_step: bool = False

    # Evaluation: a method may put another model here (EMA weights) for eval to use.
    eval_model: nn.Module | None = None
    eval_inputs: torch.Tensor | None = None
    eval_outputs: torch.Tensor | None = None

    # Running train-loss sum of the current epoch, kept on the device (no per-step sync) in
    # float64, and saved with checkpoints for exact resume.
    epoch_loss_sum: torch.Tensor = field(
        default_factory=lambda: torch.zeros((), dtype=torch.float64)
    )
    epoch_loss_count: int = 0
    train_seconds: float = 0.0  # training time over every process lifetime of this run
    metrics: dict[str, float] = field(default_factory=dict)

    stop_signal: int | None = None  # set from a signal handler; acted on at the next step

    @property
    def total_steps(self) -> int:
        return self.max_epochs * self.steps_per_epoch

    @property
    def progress(self) -> float:
        """Fraction of training done, in [0, 1]."""
        return min(1.0, self.step / max(1, self.total_steps))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def stop_requested(self) -> bool:
        return self.stop_signal is not None

    def describe_stop(self) -> str:
        if self.stop_signal is None:
            return "no stop requested"
        return f"stop requested by {signal.Signals(self.stop_signal).name}"

    def evaluation_model(self) -> nn.Module:
        """The model evaluation runs: a method's (EMA weights) if set, else the trained one."""
        return self.eval_model if self.eval_model is not None else without_ddp(self.model)

    def position(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "step": self.step, "batch_index": self.batch_index}
