"""Weight EMA (Polyak averaging): evaluate an exponential moving average of the weights."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import EmaOptions
from spotrun.train.state import State
from spotrun.train.wrapping import unwrap_model


def ema_copy(model: nn.Module) -> nn.Module:
    """A frozen copy of `model` to hold the averaged weights."""
    ema = copy.deepcopy(unwrap_model(model))
    for p in ema.parameters():
        p.requires_grad_(False)
    return ema


@torch.no_grad()
def ema_update(ema: nn.Module, model: nn.Module, decay: float) -> None:
    """ema = decay * ema + (1 - decay) * weights, for every parameter; buffers (BatchNorm
    statistics) are copied, since averaging them is not what evaluation wants.

    Helps: averaged weights sit nearer the centre of the basin SGD wanders around: typically
    +0.3-1% accuracy at the end of short runs, and a smoother eval curve. Cost: one lerp over
    the weights per update; a second copy of the model in memory. Conflicts: none.
    """
    source = unwrap_model(model)
    ema_params: list[torch.Tensor] = list(ema.parameters())
    params = [p.detach() for p in source.parameters()]
    if ema_params:
        torch._foreach_lerp_(ema_params, params, 1.0 - decay)
    for e, b in zip(ema.buffers(), source.buffers(), strict=True):
        e.copy_(b)


class Ema(AlgorithmBase):
    name = "ema"
    events = frozenset({Event.INIT, Event.AFTER_OPTIMIZER_STEP})

    def __init__(self, options: EmaOptions) -> None:
        self.options = options
        self.ema: nn.Module | None = None

    def apply(self, event: Event, state: State) -> None:
        if event is Event.INIT:
            self.ema = ema_copy(state.model)
            state.eval_model = self.ema
            return
        assert self.ema is not None
        if (state.step + 1) % self.options.update_every != 0:
            return
        decay = 0.0 if state.progress < self.options.start_frac else self.options.decay
        ema_update(self.ema, state.model, decay)

    def state_dict(self) -> dict[str, Any]:
        assert self.ema is not None
        return {"model": self.ema.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        assert self.ema is not None
        self.ema.load_state_dict(state["model"])
