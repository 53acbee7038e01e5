"""Gradient clipping: bound the update when a batch produces an outsized gradient."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import torch

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import GradClippingOptions
from spotrun.train.state import State


def clip_gradients(
    params: Iterable[torch.Tensor], threshold: float, mode: Literal["norm", "value"] = "norm"
) -> torch.Tensor | None:
    """Scale all gradients so their global L2 norm is at most `threshold` ("norm"; returns the
    norm before clipping, as a tensor: no sync), or clamp each to [-threshold, threshold].

    Helps: keeps high-LR or warmup-free runs from diverging on a bad batch. Cost: one
    reduction over all gradients. Conflicts: none; with fp16 it sees unscaled gradients.
    """
    if mode == "value":
        torch.nn.utils.clip_grad_value_(params, threshold)
        return None
    return torch.nn.utils.clip_grad_norm_(params, threshold)


class GradClipping(AlgorithmBase):
    name = "grad_clipping"
    events = frozenset({Event.BEFORE_OPTIMIZER_STEP})

    def __init__(self, options: GradClippingOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        params = [p for p in state.model.parameters() if p.grad is not None]
        clip_gradients(params, self.options.threshold, self.options.mode)
