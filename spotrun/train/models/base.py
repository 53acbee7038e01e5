"""The shapes speed-up methods rely on, so methods and models can be written apart.

* `ImageClassifier`: stem -> body -> pool -> flatten -> head. Methods that rebuild part of a
  model reach for these names (concat pooling swaps `pool` and widens `head`; a whitening
  layer lives in `stem`).
* `ResidualBlock`: output = act(shortcut(x) + residual(x)). Stochastic depth sets `drop_prob`;
  zero-init of the last BN in each block finds it as `last_bn`.
"""

from __future__ import annotations

import torch
from torch import nn


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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.shortcut(x) + self.residual_output(x))

    def residual_output(self, x: torch.Tensor) -> torch.Tensor:
        """The residual branch; stochastic depth overrides how it is kept or dropped."""
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
