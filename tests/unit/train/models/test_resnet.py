"""ResNets: published parameter counts, standard stage shapes, any input size, block contract."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.models import MODELS, build_model
from spotrun.train.models.base import ImageClassifier, ResidualBlock

PUBLISHED = {  # parameters at 1000 classes (He et al. 2016; torchvision's reference models)
    "resnet18": 11_689_512,
    "resnet34": 21_797_672,
    "resnet50": 25_557_032,
    "resnet101": 44_549_160,
}
BLOCKS = {
    "resnet18": (2, 2, 2, 2),
    "resnet34": (3, 4, 6, 3),
    "resnet50": (3, 4, 6, 3),
    "resnet101": (3, 4, 23, 3),
}


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts_and_layout(name: str) -> None:
    with torch.device("meta"):  # shapes only: no memory, no init cost
        model = build_model(name, 1000)
    assert count(model) == PUBLISHED[name]
    assert isinstance(model, ImageClassifier) and isinstance(model.head, nn.Linear)
    stages = [getattr(model.body, f"layer{i}") for i in range(1, 5)]
    assert tuple(len(s) for s in stages) == BLOCKS[name]
    for stage in stages:
        for block in stage:
            assert isinstance(block, ResidualBlock)
            assert block.last_bn is list(block.residual.children())[-1]  # the branch's final BN
            assert isinstance(block.last_bn, nn.BatchNorm2d)


def test_stage_shapes_at_224() -> None:
    model = build_model("resnet50", 10, width=8).eval()  # narrow, so it runs fast on a CPU
    x = model.stem(torch.randn(1, 3, 224, 224))
    assert x.shape == (1, 8, 56, 56)
    widths = []
    for i in range(1, 5):
        x = getattr(model.body, f"layer{i}")(x)
        widths.append(tuple(x.shape[1:]))
    assert widths == [(32, 56, 56), (64, 28, 28), (128, 14, 14), (256, 7, 7)]


@pytest.mark.parametrize("size", [32, 64, 97, 160])
def test_any_input_size(size: int) -> None:
    model = build_model("resnet18", 7).eval()
    with torch.no_grad():
        assert model(torch.randn(2, 3, size, size)).shape == (2, 7)


def test_cifar_stem_keeps_resolution() -> None:
    model = build_model("resnet18", 10, stem="cifar", width=8).eval()
    assert model.features(torch.randn(1, 3, 32, 32)).shape == (1, 64, 4, 4)
    with pytest.raises(UsageError, match="unknown stem 'tiny'"):
        build_model("resnet18", 10, stem="tiny")
    with pytest.raises(UsageError, match="bad model_options"):
        build_model("resnet18", 10, depth=3)


def test_zeroed_last_bn_makes_each_block_its_shortcut() -> None:
    model = build_model("resnet34", 10, width=8).eval()
    block = model.body.layer2[0]
    nn.init.zeros_(block.last_bn.weight)
    x = torch.randn(2, 8, 16, 16)
    with torch.no_grad():
        assert torch.allclose(block(x), torch.relu(block.shortcut(x)))


def test_kaiming_init_for_convolutions() -> None:
    torch.manual_seed(0)
    model = build_model("resnet18", 10)
    conv = model.body.layer3[0].residual.conv2  # 256 -> 256, 3x3: fan-out 2304
    assert abs(conv.weight.std().item() - (2 / 2304) ** 0.5) < 0.002
    bn = model.body.layer3[0].residual.bn2
    assert torch.equal(bn.weight, torch.ones(256)) and torch.equal(bn.bias, torch.zeros(256))


def test_every_registered_model_builds() -> None:
    for name in MODELS:
        with torch.device("meta"):
            assert count(build_model(name, 10)) > 0
