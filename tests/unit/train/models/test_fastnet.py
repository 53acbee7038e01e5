"""The CIFAR fast net: the whitening stem, its shapes and parameter count."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.models import build_model
from spotrun.train.models.base import ImageClassifier, ResidualBlock


def conv_bn(c_in: int, c_out: int) -> int:
    return 9 * c_in * c_out + 2 * c_out  # bias-free 3x3 conv, BN weight and bias


def expected_count(widths: tuple[int, int, int], classes: int, residual: bool) -> int:
    total = 3 * 2 * 2 * 24 + 24  # the 2x2 whitening conv with bias
    c_in = 24
    for w in widths:
        total += conv_bn(c_in, w) + conv_bn(w, w) + (conv_bn(w, w) if residual else 0)
        c_in = w
    return total + c_in * classes  # bias-free linear head


@pytest.mark.parametrize(("widths", "residual"), [((64, 256, 256), False), ((16, 32, 48), True)])
def test_parameter_count(widths: tuple[int, int, int], residual: bool) -> None:
    model = build_model("cifar-fastnet", 10, widths=list(widths), residual=residual)
    assert sum(p.numel() for p in model.parameters()) == expected_count(widths, 10, residual)
    assert expected_count((64, 256, 256), 10, False) == 1_972_792


def test_whitening_layer_is_where_the_method_looks() -> None:
    model = build_model("cifar-fastnet", 10)
    assert isinstance(model, ImageClassifier)
    whiten = model.stem.whiten
    assert isinstance(whiten, nn.Conv2d)
    assert (whiten.in_channels, whiten.out_channels, whiten.kernel_size) == (3, 24, (2, 2))
    assert whiten.padding == (0, 0) and whiten.bias is not None
    assert list(model.stem.children())[0] is whiten  # it is the first thing the input meets


def test_map_sizes_and_outputs() -> None:
    model = build_model("cifar-fastnet", 10, widths=[8, 16, 32]).eval()
    x = model.stem(torch.randn(2, 3, 32, 32))
    sizes = [x.shape[-1]]
    for group in model.body:
        x = group(x)
        sizes.append(x.shape[-1])
    assert sizes == [31, 15, 7, 3] and x.shape[1] == 32
    with torch.no_grad():
        for size in (16, 32, 40, 64):
            assert model(torch.randn(3, 3, size, size)).shape == (3, 10)


def test_residual_groups_use_the_block_contract() -> None:
    model = build_model("cifar-fastnet", 10, widths=[8, 8, 8], residual=True)
    blocks = [m for m in model.modules() if isinstance(m, ResidualBlock)]
    assert len(blocks) == 3
    assert all(b.last_bn is b.residual.bn2 for b in blocks)


def test_bad_widths() -> None:
    with pytest.raises(UsageError, match="three positive numbers"):
        build_model("cifar-fastnet", 10, widths=[8, 8])
