"""No weight decay on normalisation weights and biases."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import NoOptions
from spotrun.train.state import State


def _decays(p: torch.Tensor) -> bool:
    # Weights of convs and linears are >= 2-D; BN/LN scales and shifts and all biases are 1-D.
    return p.ndim > 1


def no_decay_param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two param groups for an optimizer: weights with `weight_decay`, the rest with none.

    Helps: decaying BN scales and biases only fights the normalisation (it shrinks scales that
    the next layer undoes); leaving them alone is +0.1-0.5% on ImageNet and allows a larger
    decay on the weights. Cost: none. Conflicts: none.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if _decays(p)], "weight_decay": weight_decay},
        {"params": [p for p in params if not _decays(p)], "weight_decay": 0.0},
    ]


def split_no_decay(optimizer: torch.optim.Optimizer) -> int:
    """The same, done to an optimizer that has not stepped yet: each param group is split in
    two, the second with weight_decay 0. Returns how many parameters lost their decay."""
    if optimizer.state:
        raise RuntimeError("split_no_decay must run before the optimizer's first step")
    groups = []
    moved = 0
    for group in optimizer.param_groups:
        decayed = [p for p in group["params"] if _decays(p)]
        plain = [p for p in group["params"] if not _decays(p)]
        moved += len(plain)
        if decayed:
            groups.append({**group, "params": decayed})
        if plain:
            groups.append({**group, "params": plain, "weight_decay": 0.0})
    optimizer.param_groups.clear()
    for group in groups:
        optimizer.add_param_group(group)
    return moved


class NoDecayNormBias(AlgorithmBase):
    name = "no_decay_norm_bias"
    events = frozenset({Event.INIT})

    def __init__(self, options: NoOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        split_no_decay(state.optimizer)
