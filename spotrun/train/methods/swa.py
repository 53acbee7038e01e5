"""Stochastic weight averaging (Izmailov et al., 2018, "Averaging Weights Leads to Wider
Optima and Better Generalization"): evaluate the plain mean of late-training weights."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.ema import ema_copy
from spotrun.train.methods.options import SwaOptions
from spotrun.train.state import State
from spotrun.train.wrapping import unwrap_model


@torch.no_grad()
def swa_update(average: nn.Module, model: nn.Module, count: int) -> int:
    """Fold `model`'s weights into `average`, which holds the mean of `count` snapshots:
    average += (weights - average) / (count + 1); returns the new count. Buffers (BatchNorm
    statistics) are copied from the model rather than averaged.

    Helps: the mean of weights along the end of training sits in a flatter, better region
    than any one of them: +0.5-1.5% accuracy reported for CIFAR with a long averaging window.
    Cost: one pass over the weights per snapshot; a second copy of the model. Conflicts: none
    in the catalog, but ema also takes the evaluation model: use one of the two.
    """
    source = unwrap_model(model)
    averaged: list[torch.Tensor] = list(average.parameters())
    params = [p.detach() for p in source.parameters()]
    if averaged:
        torch._foreach_lerp_(averaged, params, 1.0 / (count + 1))
    for a, b in zip(average.buffers(), source.buffers(), strict=True):
        a.copy_(b)
    return count + 1


class Swa(AlgorithmBase):
    name = "swa"
    events = frozenset({Event.INIT, Event.AFTER_OPTIMIZER_STEP})

    def __init__(self, options: SwaOptions) -> None:
        self.options = options
        self.average: nn.Module | None = None
        self.count = 0

    def apply(self, event: Event, state: State) -> None:
        if event is Event.INIT:
            self.average = ema_copy(state.model)
            state.eval_model = self.average
            return
        assert self.average is not None
        if state.progress < self.options.start_frac:
            # Until averaging starts, evaluation sees the current weights.
            swa_update(self.average, state.model, 0)
            return
        if (state.step + 1) % self.options.update_every == 0:
            self.count = swa_update(self.average, state.model, self.count)

    def state_dict(self) -> dict[str, Any]:
        assert self.average is not None
        return {"model": self.average.state_dict(), "count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        assert self.average is not None
        self.average.load_state_dict(state["model"])
        self.count = int(state["count"])
