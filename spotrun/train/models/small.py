"""Small networks for small images (the 8x8 digits set)."""

from __future__ import annotations

import torch
from torch import nn


def _conv_bn(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class DigitsNet(nn.Module):
    """Three conv layers and a linear head for 1x8x8 inputs: ~60k parameters."""

    def __init__(self, num_classes: int = 10, width: int = 32) -> None:
        super().__init__()
        self.features = nn.Sequential(
            _conv_bn(1, width),
            _conv_bn(width, 2 * width),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
            _conv_bn(2 * width, 4 * width),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))
