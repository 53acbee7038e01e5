"""Small networks for small images: the 8x8 digits set, and tests of the speed-up methods."""

from __future__ import annotations

from torch import nn

from spotrun.train.models.base import ImageClassifier, ResidualBlock


def _conv_bn(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class DigitsNet(ImageClassifier):
    """Three conv layers and a linear head for 1x8x8 inputs: ~60k parameters."""

    def __init__(self, num_classes: int = 10, width: int = 32) -> None:
        # Built in the same order as the layers run, so one seed gives one initialisation.
        stem = _conv_bn(1, width)
        body = nn.Sequential(
            _conv_bn(width, 2 * width),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
            _conv_bn(2 * width, 4 * width),
        )
        pool = nn.AdaptiveAvgPool2d(1)
        super().__init__(stem, body, nn.Linear(4 * width, num_classes), pool)


def residual_block(c_in: int, c_out: int, stride: int = 1) -> ResidualBlock:
    """Two 3x3 conv-BN layers, with a 1x1 conv-BN shortcut where the shape changes."""
    last_bn = nn.BatchNorm2d(c_out)
    residual = nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
        last_bn,
    )
    shortcut = None
    if stride != 1 or c_in != c_out:
        shortcut = nn.Sequential(
            nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out)
        )
    return ResidualBlock(residual, shortcut, last_bn=last_bn)


class SmallResNet(ImageClassifier):
    """A residual net for small images (8 to 32 px) with every shape the methods reach for:
    strided convs and a max-pool (BlurPool), residual blocks (stochastic depth, zero-init),
    a stem (patch whitening), a pool and a head (concat pooling). width 16: ~80k parameters.
    """

    def __init__(self, num_classes: int = 10, width: int = 16, in_channels: int = 3) -> None:
        stem = _conv_bn(in_channels, width)
        body = nn.Sequential(
            residual_block(width, width),
            residual_block(width, 2 * width, stride=2),
            nn.MaxPool2d(2),
            residual_block(2 * width, 2 * width),
        )
        super().__init__(stem, body, nn.Linear(2 * width, num_classes))
