"""CutMix (Yun et al., 2019): paste a box from another image; mix labels by the box's area."""

from __future__ import annotations

import math

import torch

from spotrun.train.methods.mixup import MixedTargets, sample_beta
from spotrun.train.methods.options import CutMixOptions


def cutmix_box(height: int, width: int, lam: float) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of a box covering about 1 - lam of the image, centred at a
    random pixel (torch's global generator) and clipped to the image."""
    cut = math.sqrt(1.0 - lam)
    h, w = int(height * cut), int(width * cut)
    cy = int(torch.randint(height, ()))
    cx = int(torch.randint(width, ()))
    top, bottom = max(cy - h // 2, 0), min(cy - h // 2 + h, height)
    left, right = max(cx - w // 2, 0), min(cx - w // 2 + w, width)
    return top, bottom, left, right


def cutmix_batch(
    inputs: torch.Tensor, alpha: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(images with a box pasted from x[perm], perm, lam) where lam is the fraction of each
    image left untouched; mix targets with `mix_targets(targets, perm, lam, C)`.

    Helps: regularises like MixUp while keeping images natural-looking; +1-2% on ImageNet
    ResNets on long runs, also a localisation gain. Cost: one copy per batch. Conflicts:
    mixup (both rewrite the targets).
    """
    height, width = inputs.shape[-2:]
    top, bottom, left, right = cutmix_box(height, width, sample_beta(alpha))
    perm = torch.randperm(len(inputs)).to(inputs.device)
    mixed = inputs.clone()
    mixed[..., top:bottom, left:right] = inputs[perm][..., top:bottom, left:right]
    lam = 1.0 - (bottom - top) * (right - left) / (height * width)
    return mixed, perm, lam


class CutMix(MixedTargets):
    name = "cutmix"

    def __init__(self, options: CutMixOptions) -> None:
        super().__init__()
        self.options = options

    def mix(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        return cutmix_batch(inputs, self.options.alpha)
