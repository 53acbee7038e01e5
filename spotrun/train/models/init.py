"""Standard weight initialisation: Kaiming-normal convolutions, BatchNorm at identity."""

from __future__ import annotations

from torch import nn


def kaiming_init(model: nn.Module) -> None:
    """He et al. (2015) for every convolution (fan-out, ReLU gain); BN weight 1, bias 0.

    Linear layers keep PyTorch's default initialisation, as the reference ResNets do.
    """
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.BatchNorm2d | nn.GroupNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
