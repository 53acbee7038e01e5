"""Squeeze-and-excitation (Hu et al., 2018): each conv's output channels reweighted by a
gate computed from the whole image's average of every channel."""

from __future__ import annotations

import torch
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import SqueezeExciteOptions
from spotrun.train.methods.surgery import like, replace_modules, swap_parameters
from spotrun.train.state import State
from spotrun.train.wrapping import unwrap_model


def squeeze_excite(x: torch.Tensor, reduce: nn.Module, expand: nn.Module) -> torch.Tensor:
    """x * sigmoid(expand(relu(reduce(mean of x over height and width)))), per channel of NCHW x."""
    squeezed = x.mean(dim=(2, 3), keepdim=True)
    gate = torch.sigmoid(expand(torch.relu(reduce(squeezed))))
    return x * gate


class ConvSqueezeExcite(nn.Module):
    """The original conv (its parameters unchanged), then a squeeze-excite gate on its output."""

    def __init__(self, conv: nn.Conv2d, latent_channels: int) -> None:
        super().__init__()
        self.conv = conv
        self.reduce = nn.Conv2d(conv.out_channels, latent_channels, 1)
        self.expand = nn.Conv2d(latent_channels, conv.out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return squeeze_excite(self.conv(x), self.reduce, self.expand)


def _latent(channels: int, latent_channels: float) -> int:
    # Below 1 it is a fraction of the conv's channels, as in Composer's option.
    return (
        max(1, round(channels * latent_channels)) if latent_channels < 1 else int(latent_channels)
    )


def apply_squeeze_excite(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    min_channels: int = 64,
    latent_channels: float = 64,
) -> int:
    """Put a squeeze-excite gate after every trainable Conv2d with at least `min_channels`
    outputs, in place; the optimizer, if given, trains the new gates too. Returns how many.

    Helps: cheap channel attention; +1-2% top-1 reported on ImageNet ResNets. Cost: two 1x1
    convs on a pooled vector per gated conv (small compute, some parameters and a little
    latency). Conflicts: none.
    """
    added: list[nn.Parameter] = []

    def replace(module: nn.Module) -> nn.Module | None:
        if isinstance(module, ConvSqueezeExcite):
            return module
        if (
            isinstance(module, nn.Conv2d)
            and module.out_channels >= min_channels
            and module.weight.requires_grad
        ):
            gated = ConvSqueezeExcite(module, _latent(module.out_channels, latent_channels))
            like(gated.reduce, module)
            like(gated.expand, module)
            added.extend([*gated.reduce.parameters(), *gated.expand.parameters()])
            return gated
        return None

    changed = replace_modules(model, replace)
    swap_parameters(optimizer, [], added)
    return changed


class SqueezeExcite(AlgorithmBase):
    name = "squeeze_excite"
    events = frozenset({Event.INIT})

    def __init__(self, options: SqueezeExciteOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        changed = apply_squeeze_excite(
            unwrap_model(state.model),
            state.optimizer,
            min_channels=self.options.min_channels,
            latent_channels=self.options.latent_channels,
        )
        if changed == 0:
            raise UsageError(
                f"squeeze_excite found no conv with {self.options.min_channels} or more "
                "output channels in this model",
                hint="lower --set methods.squeeze_excite.min_channels, or switch it off",
            )
