"""channels_last: store image tensors as NHWC, the layout GPU conv kernels prefer."""

from __future__ import annotations

import torch
from torch import nn

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.catalog import NoOptions
from spotrun.train.state import State


def apply_channels_last(model: nn.Module) -> nn.Module:
    """Convert `model`'s 4-D weights to channels_last in place (parameters keep their identity,
    so an optimizer built before stays valid).

    Helps: 10-30% faster convolutions with mixed precision on tensor-core GPUs. Cost: a layout
    conversion per batch; can be slower on CPUs. Conflicts: none.
    """
    return model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


class ChannelsLast(AlgorithmBase):
    name = "channels_last"
    events = frozenset({Event.INIT, Event.AFTER_DATALOADER, Event.EVAL_BEFORE_FORWARD})

    def __init__(self, options: NoOptions) -> None:
        self.o = options

    def apply(self, event: Event, state: State) -> None:
        if event is Event.INIT:
            apply_channels_last(state.model)
        elif event is Event.AFTER_DATALOADER:
            assert state.inputs is not None
            state.inputs = to_channels_last(state.inputs)
        else:
            assert state.eval_inputs is not None
            state.eval_inputs = to_channels_last(state.eval_inputs)
