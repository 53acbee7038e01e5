"""Test-time augmentation: average the predictions for a few transformed copies of each image."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import TtaOptions
from spotrun.train.state import State


def translate(x: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
    """NCHW images shifted by (dy, dx) pixels, the uncovered border filled by reflection."""
    pad = max(abs(dy), abs(dx))
    if pad == 0:
        return x
    padded = F.pad(x, (pad, pad, pad, pad), mode="reflect")
    h, w = x.shape[-2:]
    top, left = pad - dy, pad - dx
    return padded[..., top : top + h, left : left + w]


def tta_views(x: torch.Tensor, *, flips: bool = True, shift: int = 0) -> list[torch.Tensor]:
    """The views averaged over: x, its mirror image, and x shifted by +-shift diagonally."""
    views = [x]
    if shift:
        views += [translate(x, shift, shift), translate(x, -shift, -shift)]
    if flips:
        views += [v.flip(-1) for v in views]
    return views


@torch.no_grad()
def tta_logits(
    model: nn.Module,
    x: torch.Tensor,
    *,
    flips: bool = True,
    shift: int = 0,
    plain_logits: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean logits of `model` over `tta_views(x)`; pass `plain_logits` if x was already run.

    Helps: +0.2-0.5% accuracy on CIFAR-size nets for free at training time (airbench uses
    flips and 2-pixel shifts). Cost: 2x (flips) to 6x (flips and shifts) evaluation compute.
    Conflicts: none; it changes evaluation only.
    """
    views = tta_views(x, flips=flips, shift=shift)
    total = (plain_logits if plain_logits is not None else model(views[0])).float()
    for view in views[1:]:
        total = total + model(view).float()
    return total / len(views)


class TestTimeAugmentation(AlgorithmBase):
    name = "tta"
    events = frozenset({Event.EVAL_AFTER_FORWARD})
    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, options: TtaOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        assert state.eval_inputs is not None and state.eval_outputs is not None
        state.eval_outputs = tta_logits(
            state.evaluation_model(),
            state.eval_inputs,
            flips=self.options.flips,
            shift=self.options.translate,
            plain_logits=state.eval_outputs,
        )
