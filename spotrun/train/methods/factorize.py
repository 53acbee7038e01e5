"""Factorize (after Composer's method of that name): wide Linear and Conv2d layers replaced by
two thinner ones whose product is the best low-rank approximation of the original weights,
so each step does less arithmetic."""

from __future__ import annotations

import torch
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import FactorizeOptions
from spotrun.train.methods.surgery import replace_modules, swap_parameters
from spotrun.train.state import State
from spotrun.train.wrapping import unwrap_model


@torch.no_grad()
def factorize_matrix(weight: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, B) with A (rows, rank) and B (rank, cols) whose product A @ B is the best rank-`rank`
    approximation of `weight` in the Frobenius norm (truncated SVD, the singular values split
    evenly between the two as their square roots)."""
    u, s, vh = torch.linalg.svd(weight.float(), full_matrices=False)
    root = s[:rank].sqrt()
    return (u[:, :rank] * root).to(weight.dtype), (root.unsqueeze(1) * vh[:rank]).to(weight.dtype)


def _rank(rows: int, cols: int, latent: float) -> int:
    # Below 1 it is a fraction of the smaller side, as in Composer's option.
    return max(1, round(min(rows, cols) * latent)) if latent < 1 else int(latent)


def factorize_linear(linear: nn.Linear, rank: int) -> nn.Sequential:
    """Linear(in, rank, no bias) then Linear(rank, out) initialised from the truncated SVD."""
    a, b = factorize_matrix(linear.weight, rank)
    first = nn.Linear(linear.in_features, rank, bias=False)
    second = nn.Linear(rank, linear.out_features, bias=linear.bias is not None)
    first.to(linear.weight.device, linear.weight.dtype)
    second.to(linear.weight.device, linear.weight.dtype)
    with torch.no_grad():
        first.weight.copy_(b)
        second.weight.copy_(a)
        if linear.bias is not None and second.bias is not None:
            second.bias.copy_(linear.bias)
    return nn.Sequential(first, second)


def factorize_conv(conv: nn.Conv2d, rank: int) -> nn.Sequential:
    """The conv at `rank` output channels (same kernel, stride, padding), then a 1x1 conv to the
    original outputs, initialised from the truncated SVD of the (out, in*k*k) weight matrix."""
    out_channels = conv.out_channels
    a, b = factorize_matrix(conv.weight.reshape(out_channels, -1), rank)
    first = nn.Conv2d(
        conv.in_channels,
        rank,
        conv.kernel_size,  # type: ignore[arg-type]
        stride=conv.stride,  # type: ignore[arg-type]
        padding=conv.padding,  # type: ignore[arg-type]
        dilation=conv.dilation,  # type: ignore[arg-type]
        bias=False,
    )
    second = nn.Conv2d(rank, out_channels, 1, bias=conv.bias is not None)
    first.to(conv.weight.device, conv.weight.dtype)
    second.to(conv.weight.device, conv.weight.dtype)
    with torch.no_grad():
        first.weight.copy_(b.reshape(first.weight.shape))
        second.weight.copy_(a.reshape(second.weight.shape))
        if conv.bias is not None and second.bias is not None:
            second.bias.copy_(conv.bias)
    return nn.Sequential(first, second)


def apply_factorize(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    min_channels: int = 256,
    latent: float = 0.25,
) -> int:
    """Replace every trainable ungrouped Conv2d and Linear whose inputs and outputs are both at
    least `min_channels` by its factorized pair, wherever that needs fewer multiplies; the
    optimizer, if given, trains the new layers instead. Returns how many were replaced.

    Helps: less compute per step for wide layers (Composer reports a few % throughput on
    ResNets and GPT at small accuracy cost). Cost: the rank limit loses accuracy; an SVD per
    layer once. Conflicts: none.
    """
    old: list[nn.Parameter] = []
    new: list[nn.Parameter] = []

    def replace(module: nn.Module) -> nn.Module | None:
        if isinstance(module, nn.Linear) and module.weight.requires_grad:
            rows, cols = module.out_features, module.in_features
        elif isinstance(module, nn.Conv2d) and module.groups == 1 and module.weight.requires_grad:
            rows, cols = module.out_channels, module.in_channels
        else:
            return None
        if min(rows, cols) < min_channels:
            return None
        taps = module.weight[0, 0].numel() if isinstance(module, nn.Conv2d) else 1
        rank = _rank(rows, cols, latent)
        if rank * (cols * taps + rows) >= rows * cols * taps:  # no saving
            return None
        pair = (
            factorize_conv(module, rank)
            if isinstance(module, nn.Conv2d)
            else factorize_linear(module, rank)
        )
        old.extend(module.parameters())
        new.extend(pair.parameters())
        return pair

    changed = replace_modules(model, replace)
    swap_parameters(optimizer, old, new)
    return changed


class Factorize(AlgorithmBase):
    name = "factorize"
    events = frozenset({Event.INIT})

    def __init__(self, options: FactorizeOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        changed = apply_factorize(
            unwrap_model(state.model),
            state.optimizer,
            min_channels=self.options.min_channels,
            latent=self.options.latent,
        )
        if changed == 0:
            raise UsageError(
                f"factorize found no layer with {self.options.min_channels} or more inputs and "
                "outputs that a factorization would make cheaper",
                hint="lower --set methods.factorize.min_channels, or switch it off",
            )
