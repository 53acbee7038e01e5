"""MixUp (Zhang et al., 2018): train on blends of two images and of their labels."""

from __future__ import annotations

import torch

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import MixUpOptions
from spotrun.train.state import State


def sample_beta(alpha: float) -> float:
    """One draw from Beta(alpha, alpha), from torch's global generator (checkpointed)."""
    concentration = torch.tensor(alpha, dtype=torch.float64)
    return float(torch.distributions.Beta(concentration, concentration).sample())


def mixup_batch(
    inputs: torch.Tensor, alpha: float = 0.2, *, lam: float | None = None
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(lam * x + (1 - lam) * x[perm], perm, lam) with lam ~ Beta(alpha, alpha) and a random
    pairing `perm`. Mix the targets the same way with `mix_targets`.

    Helps: a strong regulariser for long runs (+~1% on ImageNet at 90+ epochs); smoother
    decision boundaries. Cost: one blend per batch; often needs more epochs to pay off.
    Conflicts: cutmix (both rewrite the same targets); fine with label_smoothing.
    """
    lam = sample_beta(alpha) if lam is None else lam
    perm = torch.randperm(len(inputs)).to(inputs.device)
    mixed = inputs * lam + inputs[perm] * (1.0 - lam)
    return mixed, perm, lam


def mix_targets(
    targets: torch.Tensor, perm: torch.Tensor, lam: float, num_classes: int
) -> torch.Tensor:
    """Soft targets lam * y + (1 - lam) * y[perm], from class indices (N,) or soft (N, C)."""
    if targets.dim() == 1:
        soft = torch.zeros(len(targets), num_classes, device=targets.device)
        soft.scatter_(1, targets.long().unsqueeze(1), 1.0)
    else:
        soft = targets.float()
    return soft * lam + soft[perm] * (1.0 - lam)


class MixedTargets(AlgorithmBase):
    """Shared by MixUp and CutMix: the batch is mixed after the dataloader, the targets just
    before the loss (when the number of classes is known from the outputs)."""

    events = frozenset({Event.AFTER_DATALOADER, Event.BEFORE_LOSS})

    def __init__(self) -> None:
        self._perm: torch.Tensor | None = None
        self._lam = 1.0

    def mix(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        raise NotImplementedError

    def apply(self, event: Event, state: State) -> None:
        if event is Event.AFTER_DATALOADER:
            assert state.inputs is not None
            state.inputs, self._perm, self._lam = self.mix(state.inputs)
        else:
            assert state.targets is not None and state.outputs is not None
            assert self._perm is not None
            state.targets = mix_targets(
                state.targets, self._perm, self._lam, state.outputs.shape[1]
            )
            self._perm = None


class MixUp(MixedTargets):
    name = "mixup"

    def __init__(self, options: MixUpOptions) -> None:
        super().__init__()
        self.options = options

    def mix(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        return mixup_batch(inputs, self.options.alpha)
