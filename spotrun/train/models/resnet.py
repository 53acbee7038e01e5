"""ResNet-18/34/50/101 (He et al., 2016) in the standard layer shapes.

Bottleneck blocks put the stride on their 3x3 convolution (the "v1.5" form most ImageNet
results since 2017 use); parameter counts at 1000 classes are the published ones: 11,689,512 /
21,797,672 / 25,557,032 / 44,549,160. Built from ImageClassifier and ResidualBlock, so speed-up
methods find `stem`, `body`, `pool`, `head` and each block's `residual`, `shortcut`, `last_bn`.
The adaptive pool lets any input size through (progressive resizing, larger test sizes).

Options (recipe `model_options`): `width`, the first stage's channels (64 standard; smaller to
fit CPU benchmarks), and `stem`: "imagenet" (7x7 stride-2 conv and a max pool, 4x smaller maps)
or "cifar" (one 3x3 stride-1 conv, for 32x32 images).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Literal

from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.models.base import ImageClassifier, ResidualBlock
from spotrun.train.models.init import kaiming_init

BlockKind = Literal["basic", "bottleneck"]
EXPANSION: dict[BlockKind, int] = {"basic": 1, "bottleneck": 4}

# depth -> (block kind, blocks per stage)
LAYOUTS: dict[int, tuple[BlockKind, tuple[int, int, int, int]]] = {
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
}


def conv3x3(c_in: int, c_out: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(c_in: int, c_out: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, kernel_size=1, stride=stride, bias=False)


def _shortcut(c_in: int, c_out: int, stride: int) -> nn.Module | None:
    """A 1x1 projection where the block changes shape; None (identity) where it does not."""
    if stride == 1 and c_in == c_out:
        return None
    return nn.Sequential(OrderedDict(conv=conv1x1(c_in, c_out, stride), bn=nn.BatchNorm2d(c_out)))


def basic_block(c_in: int, width: int, stride: int) -> ResidualBlock:
    """Two 3x3 convolutions (ResNet-18/34)."""
    bn2 = nn.BatchNorm2d(width)
    residual = nn.Sequential(
        OrderedDict(
            conv1=conv3x3(c_in, width, stride),
            bn1=nn.BatchNorm2d(width),
            act1=nn.ReLU(inplace=True),
            conv2=conv3x3(width, width),
            bn2=bn2,
        )
    )
    return ResidualBlock(residual, _shortcut(c_in, width, stride), last_bn=bn2)


def bottleneck_block(c_in: int, width: int, stride: int) -> ResidualBlock:
    """1x1 down to `width`, 3x3 (strided), 1x1 up to 4 x width (ResNet-50/101)."""
    c_out = width * EXPANSION["bottleneck"]
    bn3 = nn.BatchNorm2d(c_out)
    residual = nn.Sequential(
        OrderedDict(
            conv1=conv1x1(c_in, width),
            bn1=nn.BatchNorm2d(width),
            act1=nn.ReLU(inplace=True),
            conv2=conv3x3(width, width, stride),
            bn2=nn.BatchNorm2d(width),
            act2=nn.ReLU(inplace=True),
            conv3=conv1x1(width, c_out),
            bn3=bn3,
        )
    )
    return ResidualBlock(residual, _shortcut(c_in, c_out, stride), last_bn=bn3)


def _stem(kind: str, width: int) -> nn.Sequential:
    if kind == "imagenet":
        return nn.Sequential(
            OrderedDict(
                conv=nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False),
                bn=nn.BatchNorm2d(width),
                act=nn.ReLU(inplace=True),
                pool=nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
            )
        )
    if kind == "cifar":
        return nn.Sequential(
            OrderedDict(conv=conv3x3(3, width), bn=nn.BatchNorm2d(width), act=nn.ReLU(inplace=True))
        )
    raise UsageError(f"resnet: unknown stem '{kind}'", hint="use stem 'imagenet' or 'cifar'")


def resnet(
    depth: int, num_classes: int = 1000, *, width: int = 64, stem: str = "imagenet"
) -> ImageClassifier:
    if depth not in LAYOUTS:
        raise UsageError(f"no ResNet-{depth}", hint=f"depths: {', '.join(map(str, LAYOUTS))}")
    if width < 1:
        raise UsageError(f"resnet: width must be at least 1, got {width}")
    kind, counts = LAYOUTS[depth]
    make_block = basic_block if kind == "basic" else bottleneck_block
    stages: OrderedDict[str, nn.Module] = OrderedDict()
    c_in = width
    for i, count in enumerate(counts):
        stage_width = width * 2**i
        blocks = []
        for j in range(count):
            blocks.append(make_block(c_in, stage_width, 2 if (i > 0 and j == 0) else 1))
            c_in = stage_width * EXPANSION[kind]
        stages[f"layer{i + 1}"] = nn.Sequential(*blocks)
    model = ImageClassifier(_stem(stem, width), nn.Sequential(stages), nn.Linear(c_in, num_classes))
    kaiming_init(model)
    return model


def resnet18(
    num_classes: int = 1000, *, width: int = 64, stem: str = "imagenet"
) -> ImageClassifier:
    return resnet(18, num_classes, width=width, stem=stem)


def resnet34(
    num_classes: int = 1000, *, width: int = 64, stem: str = "imagenet"
) -> ImageClassifier:
    return resnet(34, num_classes, width=width, stem=stem)


def resnet50(
    num_classes: int = 1000, *, width: int = 64, stem: str = "imagenet"
) -> ImageClassifier:
    return resnet(50, num_classes, width=width, stem=stem)


def resnet101(
    num_classes: int = 1000, *, width: int = 64, stem: str = "imagenet"
) -> ImageClassifier:
    return resnet(101, num_classes, width=width, stem=stem)
