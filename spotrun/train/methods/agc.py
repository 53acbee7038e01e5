"""Adaptive gradient clipping (Brock et al., 2021, "High-Performance Large-Scale Image
Recognition Without Normalization"): clip each unit's gradient relative to its weight's size."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import AgcOptions
from spotrun.train.state import State


def unitwise_norm(tensor: torch.Tensor) -> torch.Tensor:
    """L2 norm per output unit (row of a linear weight, filter of a conv), shaped to broadcast
    against `tensor`; vectors and scalars (biases, gains) count as one unit."""
    if tensor.ndim <= 1:
        return tensor.norm()
    dims = tuple(range(1, tensor.ndim))
    return torch.linalg.vector_norm(tensor, dim=dims, keepdim=True)


@torch.no_grad()
def adaptive_clip_gradients(
    params: Iterable[torch.Tensor], clipping: float = 0.01, eps: float = 1e-3
) -> None:
    """Scale each unit's gradient G down to clipping * max(||W||, eps) / ||G|| of itself
    wherever ||G|| exceeds clipping * max(||W||, eps); other units are left alone.

    Helps: large batches and high learning rates without normalisation layers (NFNets); in
    a BatchNorm network it is a milder safety net than a global norm. Cost: two norms per
    parameter per step. Conflicts: none; with fp16 it sees unscaled gradients.
    """
    for p in params:
        if p.grad is None:
            continue
        limit = unitwise_norm(p.detach()).clamp(min=eps) * clipping
        grad_norm = unitwise_norm(p.grad)
        # Units already within the limit keep a factor of exactly 1.
        factor = torch.where(grad_norm > limit, limit / grad_norm.clamp(min=1e-6), 1.0)
        p.grad.mul_(factor.to(p.grad.dtype))


class AdaptiveGradClipping(AlgorithmBase):
    name = "agc"
    events = frozenset({Event.BEFORE_OPTIMIZER_STEP})

    def __init__(self, options: AgcOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        adaptive_clip_gradients(state.model.parameters(), self.options.clipping, self.options.eps)
