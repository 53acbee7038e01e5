"""The shapes speed-up methods rely on, so methods and models can be written apart.

* `ImageClassifier`: stem -> body -> pool -> flatten -> head. Methods that rebuild part of a
  model reach for these names (concat pooling swaps `pool` and widens `head`; a whitening
  layer lives in `stem`).
* `ResidualBlock`: output = act(shortcut(x) + residual(x)). Stochastic depth sets `drop_prob`
  (and `drop_mode`); zero-init of the last BN in each block finds it as `last_bn`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch import nn

DropMode = Literal["sample", "block"]


def stochastic_residual(
    residual: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    drop_prob: float,
    mode: DropMode = "sample",
) -> torch.Tensor:
    """A residual branch kept with probability 1 - drop_prob, scaled by 1 / (1 - drop_prob).

    The scaling keeps the expected output unchanged, so evaluation runs the branch as is.
    "sample" draws one keep/drop per image (the branch always runs); "block" draws one for the
    whole batch from the CPU generator (no device sync) and skips the branch's compute when
    dropped, returning a scalar zero that broadcasts against the shortcut.
    """
    keep = 1.0 - drop_prob
    if mode == "block":
        if float(torch.rand(())) >= keep:
            return x.new_zeros(())
        return residual(x) / keep
    out = residual(x)
    shape = (out.shape[0],) + (1,) * (out.dim() - 1)
    mask = torch.empty(shape, dtype=out.dtype, device=out.device).bernoulli_(keep)
    return out * mask / keep


class ResidualBlock(nn.Module):
    def __init__(
        self,
        residual: nn.Module,
        shortcut: nn.Module | None = None,
        *,
        last_bn: nn.BatchNorm2d | None = None,
        activation: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.residual = residual
        self.shortcut = shortcut if shortcut is not None else nn.Identity()
        self.last_bn = last_bn  # the BatchNorm that ends `residual` (a reference into it)
        self.activation = activation if activation is not None else nn.ReLU(inplace=True)
        self.drop_prob = 0.0  # set by stochastic depth; 0 = the block always runs
        self.drop_mode: DropMode = "sample"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.shortcut(x) + self.residual_output(x))

    def residual_output(self, x: torch.Tensor) -> torch.Tensor:
        """The residual branch, randomly dropped in training when stochastic depth is on."""
        if self.drop_prob > 0.0 and self.training:
            return stochastic_residual(self.residual, x, self.drop_prob, self.drop_mode)
        return self.residual(x)


class ImageClassifier(nn.Module):
    def __init__(
        self, stem: nn.Module, body: nn.Module, head: nn.Linear, pool: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.stem = stem
        self.body = body
        self.pool = pool if pool is not None else nn.AdaptiveAvgPool2d(1)
        self.head = head

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self.stem(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.features(x)), 1))
