"""Stochastic depth (Huang et al., 2016): drop residual branches at random while training."""

from __future__ import annotations

from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import StochasticDepthOptions
from spotrun.train.models.base import DropMode, ResidualBlock
from spotrun.train.state import State
from spotrun.train.wrapping import unwrap_model


def apply_stochastic_depth(
    model: nn.Module,
    drop_rate: float = 0.2,
    *,
    schedule: str = "linear",
    mode: DropMode = "sample",
) -> list[float]:
    """Set drop probabilities on every ResidualBlock; returns them in model order.

    "linear": block i of L drops with drop_rate * (i + 1) / L (early blocks matter most);
    "uniform": all drop_rate. The maths of one block is `stochastic_residual`. Helps: a
    regulariser for deep residual nets on long runs; "block" mode also skips the dropped
    blocks' compute. Cost: a mask per block ("sample"); none ("block"). Conflicts: "block"
    with DDP (a skipped block leaves parameters without gradients), use "sample" there.
    """
    blocks = [m for m in model.modules() if isinstance(m, ResidualBlock)]
    probs = []
    for i, block in enumerate(blocks):
        p = drop_rate * (i + 1) / len(blocks) if schedule == "linear" else drop_rate
        block.drop_prob = p
        block.drop_mode = mode
        probs.append(p)
    return probs


class StochasticDepth(AlgorithmBase):
    name = "stochastic_depth"
    events = frozenset({Event.INIT})

    def __init__(self, options: StochasticDepthOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        if self.options.mode == "block" and state.world_size > 1:
            raise UsageError(
                "stochastic_depth mode=block skips whole blocks, which DDP cannot do (their "
                "parameters get no gradient)",
                hint="use --set methods.stochastic_depth.mode=sample for multi-process runs",
            )
        probs = apply_stochastic_depth(
            unwrap_model(state.model),
            self.options.drop_rate,
            schedule=self.options.schedule,
            mode=self.options.mode,
        )
        if not probs:
            raise UsageError(
                "stochastic_depth found no ResidualBlock in this model",
                hint="switch it off with --set methods.stochastic_depth=null",
            )
