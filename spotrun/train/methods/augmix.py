"""AugMix (Hendrycks et al., 2020): each training image becomes a blend of itself and of
several short chains of random augmentations, so it stays close to the original image while
seeing varied corruptions. (The paper's Jensen-Shannon consistency loss is not applied; as in
Composer, the augmentation alone.)"""

from __future__ import annotations

import torch

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import AugMixOptions
from spotrun.train.methods.randaugment import OPERATIONS, randaugment_batch
from spotrun.train.state import State


def augmix_weights(n: int, width: int, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(chain weights (n, width) ~ Dirichlet(alpha), original's share (n,) ~ Beta(alpha, alpha)),
    drawn from torch's global generator in float64."""
    concentration = torch.full((width,), alpha, dtype=torch.float64)
    chain_weights = torch.distributions.Dirichlet(concentration).sample((n,))
    a = torch.tensor(alpha, dtype=torch.float64)
    keep = torch.distributions.Beta(a, a).sample((n,))
    return chain_weights, keep


def augmix_mix(
    inputs: torch.Tensor,
    chains: list[torch.Tensor],
    chain_weights: torch.Tensor,
    keep: torch.Tensor,
) -> torch.Tensor:
    """keep * x + (1 - keep) * sum_i w_i * chain_i, per image."""
    n = inputs.shape[0]
    w = chain_weights.to(inputs.device, inputs.dtype)
    mixed = sum(
        (w[:, i].view(n, 1, 1, 1) * chain for i, chain in enumerate(chains)),
        torch.zeros_like(inputs),
    )
    share = keep.to(inputs.device, inputs.dtype).view(n, 1, 1, 1)
    return share * inputs + (1 - share) * mixed


def augmix_batch(
    inputs: torch.Tensor,
    width: int = 3,
    max_depth: int = 3,
    magnitude: float = 0.3,
    alpha: float = 1.0,
    operations: tuple[str, ...] = OPERATIONS,
) -> torch.Tensor:
    """NCHW images, each `keep * x + (1 - keep) * sum_i w_i * chain_i(x)` over `width` chains
    of 1 to `max_depth` RandAugment operations (randaugment_batch) at `magnitude`, with
    w ~ Dirichlet(alpha) and keep ~ Beta(alpha, alpha) per image.

    Helps: robustness to corruptions and calibration; clean accuracy about unchanged on
    CIFAR/ImageNet at full training length. Cost: `width` x up to `max_depth` augmentation
    passes per batch. Conflicts: none.
    """
    chains = []
    for _ in range(width):
        depth = int(torch.randint(1, max_depth + 1, ()))
        chains.append(randaugment_batch(inputs, depth, magnitude, operations))
    chain_weights, keep = augmix_weights(inputs.shape[0], width, alpha)
    return augmix_mix(inputs, chains, chain_weights, keep)


class AugMix(AlgorithmBase):
    name = "augmix"
    events = frozenset({Event.AFTER_DATALOADER})

    def __init__(self, options: AugMixOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        assert state.inputs is not None
        o = self.options
        state.inputs = augmix_batch(state.inputs, o.width, o.max_depth, o.magnitude, o.alpha)
