"""Ghost BatchNorm (Hoffer et al., 2017, "Train longer, generalize better"): normalise each
small slice of a large batch with its own statistics, as if the batch were several."""

from __future__ import annotations

import math

import torch
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import GhostBatchNormOptions
from spotrun.train.methods.surgery import replace_modules
from spotrun.train.state import State
from spotrun.train.wrapping import unwrap_model

_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def ghost_batch_norm(
    x: torch.Tensor, bn: nn.modules.batchnorm._BatchNorm, ghost_batch_size: int
) -> torch.Tensor:
    """`bn` applied to ceil(len(x) / ghost_batch_size) near-equal slices of the batch, each
    normalised by its own mean and variance, in training; plain `bn` in evaluation. The running
    statistics are updated once per slice.

    Helps: the noise of small-batch statistics regularises large-batch training (reported
    to close part of the large-batch generalisation gap). Cost: one BatchNorm call per slice
    instead of one per batch. Conflicts: none.
    """
    if not bn.training or x.shape[0] <= ghost_batch_size:
        return bn(x)
    slices = x.chunk(math.ceil(x.shape[0] / ghost_batch_size))
    return torch.cat([bn(part) for part in slices])


class GhostBatchNorm(nn.Module):
    """Wraps a BatchNorm (its parameters and statistics unchanged) with ghost batches."""

    def __init__(self, bn: nn.modules.batchnorm._BatchNorm, ghost_batch_size: int) -> None:
        super().__init__()
        self.bn = bn
        self.ghost_batch_size = ghost_batch_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ghost_batch_norm(x, self.bn, self.ghost_batch_size)


def apply_ghost_batchnorm(model: nn.Module, ghost_batch_size: int = 32) -> int:
    """Wrap every BatchNorm in `model` with GhostBatchNorm, in place; returns how many.

    A BatchNorm reachable by two names (a block's `last_bn` reference) gets one wrapper.
    """
    wrappers: dict[int, GhostBatchNorm] = {}

    def replace(module: nn.Module) -> nn.Module | None:
        if isinstance(module, GhostBatchNorm):
            return module
        if isinstance(module, _BATCH_NORMS):
            if id(module) not in wrappers:
                wrappers[id(module)] = GhostBatchNorm(module, ghost_batch_size)
            return wrappers[id(module)]
        return None

    replace_modules(model, replace)
    return len(wrappers)


class GhostBatchNormMethod(AlgorithmBase):
    name = "ghost_batchnorm"
    events = frozenset({Event.INIT})

    def __init__(self, options: GhostBatchNormOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        if apply_ghost_batchnorm(unwrap_model(state.model), self.options.ghost_batch_size) == 0:
            raise UsageError(
                "ghost_batchnorm found no BatchNorm layer in this model",
                hint="switch it off with --set methods.ghost_batchnorm=null",
            )
