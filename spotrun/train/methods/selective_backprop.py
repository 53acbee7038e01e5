"""Selective backprop (Jiang et al., 2019): train on the examples the model gets most wrong."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import SelectiveBackpropOptions
from spotrun.train.methods.progressive_resizing import resize_batch
from spotrun.train.state import State
from spotrun.train.wrapping import without_ddp


def select_hardest(
    inputs: torch.Tensor, targets: torch.Tensor, losses: torch.Tensor, keep: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The round(keep * N) examples (at least one) with the highest `losses`, in batch order.

    Helps: in the middle of training most examples are already learned; backpropagating only
    the hard ones saves compute at little accuracy cost. Cost: a forward pass (no grad, maybe
    on smaller images) over the full batch to score it. Conflicts: none; it runs before
    mixup/cutmix so selection sees clean labels.
    """
    k = max(1, round(keep * len(inputs)))
    chosen = torch.topk(losses, k, sorted=False).indices.sort().values
    return inputs[chosen], targets[chosen]


@torch.no_grad()
def per_example_loss(
    model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, scale_factor: float = 1.0
) -> torch.Tensor:
    """Cross-entropy of each example under `model` in eval mode (BatchNorm statistics untouched)."""
    if scale_factor < 1.0:
        h, w = inputs.shape[-2:]
        size = (max(1, round(h * scale_factor)), max(1, round(w * scale_factor)))
        inputs = resize_batch(inputs, size)
    was_training = model.training
    model.eval()
    try:
        logits = model(inputs)
    finally:
        model.train(was_training)
    return F.cross_entropy(logits.float(), targets, reduction="none")


class SelectiveBackprop(AlgorithmBase):
    name = "selective_backprop"
    events = frozenset({Event.AFTER_DATALOADER})

    def __init__(self, options: SelectiveBackpropOptions) -> None:
        self.options = options

    def match(self, event: Event, state: State) -> bool:
        o = self.options
        return (
            event is Event.AFTER_DATALOADER
            and o.start_frac <= state.progress < o.end_frac
            and state.step % o.interval == 0
        )

    def apply(self, event: Event, state: State) -> None:
        assert state.inputs is not None and state.targets is not None
        losses = per_example_loss(
            without_ddp(state.model), state.inputs, state.targets, self.options.scale_factor
        )
        state.inputs, state.targets = select_hardest(
            state.inputs, state.targets, losses, self.options.keep
        )
