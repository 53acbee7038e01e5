"""ColOut (Composer): drop random rows and columns of a batch's images."""

from __future__ import annotations

import torch

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import ColOutOptions
from spotrun.train.state import State


def colout_batch(inputs: torch.Tensor, p_row: float = 0.15, p_col: float = 0.15) -> torch.Tensor:
    """The batch without round(p_row * H) random rows and round(p_col * W) random columns
    (the same ones for every image, so the batch stays one tensor; torch's global generator).

    Helps: a regulariser that also shrinks images, so steps get cheaper ((1-p)^2 of the
    pixels). Cost: one gather per batch. Conflicts: none; with progressive_resizing the
    two shrinks multiply.
    """
    height, width = inputs.shape[-2:]
    keep_rows = torch.randperm(height)[: height - round(p_row * height)].sort().values
    keep_cols = torch.randperm(width)[: width - round(p_col * width)].sort().values
    rows = keep_rows.to(inputs.device)
    cols = keep_cols.to(inputs.device)
    return inputs.index_select(-2, rows).index_select(-1, cols)


class ColOut(AlgorithmBase):
    name = "colout"
    events = frozenset({Event.AFTER_DATALOADER})

    def __init__(self, options: ColOutOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        assert state.inputs is not None
        state.inputs = colout_batch(state.inputs, self.options.p_row, self.options.p_col)
