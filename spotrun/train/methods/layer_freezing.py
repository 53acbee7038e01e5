"""Layer freezing (Composer; Brock et al. 2017, FreezeOut): stop training early layers late."""

from __future__ import annotations

import math

import torch
from torch import nn

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import LayerFreezingOptions
from spotrun.train.state import State
from spotrun.train.wrapping import unwrap_model


def frozen_fraction(progress: float, start_frac: float = 0.6, freeze_level: float = 0.8) -> float:
    """Fraction of layers frozen at `progress`: 0 until start_frac, then rising linearly to
    freeze_level at the end of training."""
    if progress <= start_frac:
        return 0.0
    return freeze_level * min(1.0, (progress - start_frac) / (1.0 - start_frac))


def layers(model: nn.Module) -> list[nn.Module]:
    """The modules that own parameters directly, in the order the model declares them."""
    return [m for m in model.modules() if next(m.parameters(recurse=False), None) is not None]


def layers_to_freeze(model: nn.Module, fraction: float) -> list[nn.Module]:
    found = layers(model)
    return found[: math.floor(fraction * len(found) + 1e-9)]


def freeze_layers(model: nn.Module, fraction: float) -> int:
    """Stop gradients to the first `fraction` of the model's layers; returns how many.

    Only ever freezes (never unfreezes), so parameters frozen for other reasons stay frozen.
    Helps: the backward pass skips weight gradients of frozen layers, saving up to ~1/3 of
    their cost late in training, when early features have settled. Cost: some accuracy if
    freezing starts too early. Conflicts: none; under DDP the frozen layers' gradients are
    dropped after backward instead (DDP fixes its parameter set when it is built).
    """
    chosen = layers_to_freeze(model, fraction)
    for layer in chosen:
        for p in layer.parameters(recurse=False):
            p.requires_grad_(False)
    return len(chosen)


class LayerFreezing(AlgorithmBase):
    name = "layer_freezing"

    def __init__(self, options: LayerFreezingOptions) -> None:
        self.options = options
        self.frozen = 0
        self._frozen_params: list[torch.nn.Parameter] = []
        self.events = frozenset({Event.BATCH_START, Event.AFTER_BACKWARD})

    def match(self, event: Event, state: State) -> bool:
        if event is Event.AFTER_BACKWARD:
            return state.world_size > 1 and bool(self._frozen_params)
        return event in self.events

    def apply(self, event: Event, state: State) -> None:
        model = unwrap_model(state.model)
        fraction = frozen_fraction(
            state.progress, self.options.start_frac, self.options.freeze_level
        )
        if event is Event.AFTER_BACKWARD:
            for p in self._frozen_params:
                p.grad = None  # the optimizer skips parameters without a gradient
        elif state.world_size > 1:
            chosen = layers_to_freeze(model, fraction)
            self.frozen = len(chosen)
            self._frozen_params = [p for layer in chosen for p in layer.parameters(recurse=False)]
        else:
            self.frozen = freeze_layers(model, fraction)
