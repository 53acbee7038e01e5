"""A small, fast network for 32x32 images (the airbench / ResNet-9 class of CIFAR-10 nets).

    stem:  whiten (2x2 patch conv, 3 -> 24 channels, bias) -> GELU            32 -> 31 px
    body:  group1, group2, group3; each: 3x3 conv -> 2x2 max pool -> BN -> GELU,
           then a 3x3 conv -> BN -> GELU (or, with residual=True, a two-conv ResidualBlock)
                                                                           31 -> 15 -> 7 -> 3 px
    pool:  global max pool;   head: linear, no bias

`model.stem.whiten` is the nn.Conv2d(3, 24, kernel_size=2) that the patch_whitening method
fills: 24 filters = both signs of the 12 eigenvectors of the covariance of 2x2x3 patches of the
training images, each scaled by 1/sqrt(eigenvalue + eps); the method may then freeze it. Until
then it is an ordinary learned convolution with Kaiming initialisation.

Options (recipe `model_options`): `widths`, the three groups' channels (default 64, 256, 256;
about 1.97M parameters at 10 classes), and `residual` (default False).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.models.base import ImageClassifier, ResidualBlock
from spotrun.train.models.init import kaiming_init

PATCH = 2  # the whitening layer's kernel size
WHITEN_CHANNELS = 2 * 3 * PATCH * PATCH  # +/- each eigenvector of a 12-dimensional patch


def _conv(c_in: int, c_out: int) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False)


def conv_group(c_in: int, width: int, *, residual: bool) -> nn.Sequential:
    """Conv, halve the map, normalise; then one more conv, plain or inside a residual block."""
    layers: OrderedDict[str, nn.Module] = OrderedDict(
        conv=_conv(c_in, width), pool=nn.MaxPool2d(2), bn=nn.BatchNorm2d(width), act=nn.GELU()
    )
    if residual:
        last_bn = nn.BatchNorm2d(width)
        branch = nn.Sequential(
            OrderedDict(
                conv1=_conv(width, width),
                bn1=nn.BatchNorm2d(width),
                act1=nn.GELU(),
                conv2=_conv(width, width),
                bn2=last_bn,
            )
        )
        layers["block"] = ResidualBlock(branch, last_bn=last_bn, activation=nn.GELU())
    else:
        layers.update(conv2=_conv(width, width), bn2=nn.BatchNorm2d(width), act2=nn.GELU())
    return nn.Sequential(layers)


def fast_cifar_net(
    num_classes: int = 10, *, widths: Sequence[int] = (64, 256, 256), residual: bool = False
) -> ImageClassifier:
    widths = tuple(int(w) for w in widths)
    if len(widths) != 3 or min(widths) < 1:
        raise UsageError(f"cifar-fastnet: widths must be three positive numbers, got {widths}")
    stem = nn.Sequential(
        OrderedDict(
            whiten=nn.Conv2d(3, WHITEN_CHANNELS, kernel_size=PATCH, padding=0, bias=True),
            act=nn.GELU(),
        )
    )
    groups: OrderedDict[str, nn.Module] = OrderedDict()
    c_in = WHITEN_CHANNELS
    for i, width in enumerate(widths):
        groups[f"group{i + 1}"] = conv_group(c_in, width, residual=residual)
        c_in = width
    model = ImageClassifier(
        stem,
        nn.Sequential(groups),
        nn.Linear(c_in, num_classes, bias=False),
        nn.AdaptiveMaxPool2d(1),
    )
    kaiming_init(model)
    return model
