"""CutOut (DeVries & Taylor, 2017): zero a random square of each training image."""

from __future__ import annotations

import torch

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import CutOutOptions
from spotrun.train.state import State


def cutout_batch(inputs: torch.Tensor, size_frac: float = 0.5, holes: int = 1) -> torch.Tensor:
    """NCHW images with `holes` squares of side size_frac * min(H, W) zeroed in each, centred at
    random pixels (torch's global generator) and clipped at the borders.

    Helps: a cheap regulariser for small-image nets (CIFAR +0.5-1% on long runs). Cost: one
    masked multiply per batch. Conflicts: none.
    """
    n, _, height, width = inputs.shape
    side = max(1, round(size_frac * min(height, width)))
    keep = torch.ones(n, 1, height, width, dtype=torch.bool)
    rows = torch.arange(height).view(1, height, 1)
    cols = torch.arange(width).view(1, 1, width)
    for _ in range(holes):
        top = torch.randint(height, (n, 1, 1)) - side // 2
        left = torch.randint(width, (n, 1, 1)) - side // 2
        inside = (rows >= top) & (rows < top + side) & (cols >= left) & (cols < left + side)
        keep &= ~inside.unsqueeze(1)
    return inputs * keep.to(inputs.device, inputs.dtype)


class CutOut(AlgorithmBase):
    name = "cutout"
    events = frozenset({Event.AFTER_DATALOADER})

    def __init__(self, options: CutOutOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        assert state.inputs is not None
        state.inputs = cutout_batch(state.inputs, self.options.size_frac, self.options.holes)
