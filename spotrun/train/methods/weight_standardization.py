"""Weight standardisation (Qiao et al., 2019, "Micro-Batch Training with Batch-Channel
Normalization and Weight Standardization"): every conv filter used with zero mean, unit
variance."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parametrize

from spotrun.core.errors import UsageError
from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import WeightStandardizationOptions
from spotrun.train.state import State
from spotrun.train.wrapping import unwrap_model


def standardize_weight(weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Each output filter of `weight` minus its mean, divided by sqrt(its variance + eps)."""
    dims = tuple(range(1, weight.ndim))
    mean = weight.mean(dim=dims, keepdim=True)
    var = weight.var(dim=dims, unbiased=False, keepdim=True)
    return (weight - mean) / torch.sqrt(var + eps)


class _Standardize(nn.Module):
    def __init__(self, eps: float) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return standardize_weight(weight, self.eps)


def apply_weight_standardization(
    model: nn.Module, eps: float = 1e-5, n_last_layers_ignore: int = 0
) -> int:
    """Standardise the weights of every trainable conv of `model` on the fly (a
    parametrization: the stored parameter stays the same object, so optimizers stay valid),
    except the last `n_last_layers_ignore` convs and frozen ones (a whitening stem); returns
    how many.

    Helps: smoother loss landscape; with GroupNorm it matches BatchNorm at micro-batch sizes.
    Cost: a mean and variance over each conv's weights per forward. Conflicts: none.
    """
    convs = [
        m
        for m in model.modules()
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)) and m.weight.requires_grad
    ]
    chosen = convs[: len(convs) - n_last_layers_ignore] if n_last_layers_ignore else convs
    for conv in chosen:
        if not parametrize.is_parametrized(conv, "weight"):
            parametrize.register_parametrization(conv, "weight", _Standardize(eps))
    return len(chosen)


class WeightStandardization(AlgorithmBase):
    name = "weight_standardization"
    events = frozenset({Event.INIT})

    def __init__(self, options: WeightStandardizationOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        changed = apply_weight_standardization(
            unwrap_model(state.model), self.options.eps, self.options.n_last_layers_ignore
        )
        if changed == 0:
            raise UsageError(
                "weight_standardization found no trainable conv layer in this model",
                hint="switch it off with --set methods.weight_standardization=null",
            )
