"""Sharpness-aware minimisation (Foret et al., 2021).

Instead of the gradient at w, step with the gradient at w + e, where e = rho * g / |g| points
uphill: the model is pushed toward flat minima, which generalise better.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import SamOptions
from spotrun.train.state import State


def sam_perturb(
    params: Sequence[torch.Tensor], rho: float = 0.05, epsilon: float = 1e-12
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Move each parameter that has a gradient by rho * g / (|g| + epsilon), |g| the global L2
    norm; returns (parameter, original value) pairs for `sam_restore`.

    Then zero the gradients, compute the loss and its gradient again at the moved point,
    restore, and let the optimizer step with that second gradient. Helps: +0.5-1.5% accuracy
    on CIFAR/ImageNet nets and more robustness to label noise. Cost: a second forward and
    backward pass on each SAM step (about 2x step time; `interval` > 1 spends it less often).
    Conflicts: fp16 mixed precision (bf16 is fine).
    """
    moved: list[tuple[torch.Tensor, torch.Tensor]] = []
    grads = [(p, p.grad) for p in params if p.grad is not None]
    if not grads:
        return moved
    with torch.no_grad():
        norm = torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g) for _, g in grads])
        )
        scale = rho / (norm + epsilon)
        for p, g in grads:
            moved.append((p, p.detach().clone()))
            p.add_(g * scale.to(g.dtype))
    return moved


def sam_restore(moved: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Put back the values `sam_perturb` saved (exactly: no floating-point round trip)."""
    with torch.no_grad():
        for p, original in moved:
            p.copy_(original)


class Sam(AlgorithmBase):
    name = "sam"
    events = frozenset({Event.AFTER_FORWARD, Event.BEFORE_OPTIMIZER_STEP})

    def __init__(self, options: SamOptions) -> None:
        self.options = options
        self._autocast: tuple[bool, torch.dtype] = (False, torch.float32)

    def apply(self, event: Event, state: State) -> None:
        device_type = state.device.type
        if event is Event.AFTER_FORWARD:
            # Remember whether the forward ran under autocast, to run the second pass alike.
            self._autocast = (
                torch.is_autocast_enabled(device_type),
                torch.get_autocast_dtype(device_type),
            )
            return
        if state.step % self.options.interval != 0:
            return
        assert state.inputs is not None and state.targets is not None
        moved = sam_perturb(list(state.model.parameters()), self.options.rho, self.options.epsilon)
        state.optimizer.zero_grad(set_to_none=True)
        enabled, dtype = self._autocast
        with torch.autocast(device_type, dtype=dtype, enabled=enabled):
            loss = state.loss_fn(state.model(state.inputs), state.targets)
        loss.backward()
        sam_restore(moved)
