"""Zero-init residual (Goyal et al., 2017): every residual block starts as the identity."""

from __future__ import annotations

from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import NoOptions
from spotrun.train.models.base import ResidualBlock
from spotrun.train.state import State
from spotrun.train.wrapping import unwrap_model


def zero_init_residual(model: nn.Module) -> int:
    """Set the scale of the last BatchNorm in every ResidualBlock to zero; returns how many.

    The network then starts as a shallower one and deepens as those scales grow. Helps: stable
    large-batch, high-LR starts (the ImageNet-in-an-hour recipe), often +0.2-0.5% accuracy.
    Cost: none. Conflicts: none (zero-init happens before a checkpoint loads over it).
    """
    count = 0
    for module in model.modules():
        if isinstance(module, ResidualBlock) and module.last_bn is not None:
            nn.init.zeros_(module.last_bn.weight)
            count += 1
    return count


class ZeroInitResidual(AlgorithmBase):
    name = "zero_init_residual"
    events = frozenset({Event.INIT})

    def __init__(self, options: NoOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        if zero_init_residual(unwrap_model(state.model)) == 0:
            raise UsageError(
                "zero_init_residual found no ResidualBlock with a last_bn in this model",
                hint="switch it off with --set methods.zero_init_residual=null",
            )
