"""Language-model methods that change the GPT model's parts at INIT (before a checkpoint loads).

Each switches one option of spotrun.train.models.gpt.GPT through that option's setter (the
same code the constructor uses) and hands the removed and added parameters to the optimizer.
The maths of each lives in spotrun.train.models.transformer_ops (exported from
spotrun.train.functional); the method READMEs say what each buys on shakespeare.
"""

from __future__ import annotations

import torch
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import NoOptions, RmsNormOptions, RotaryOptions
from spotrun.train.methods.surgery import swap_parameters
from spotrun.train.models.gpt import (
    GPT,
    Swap,
    set_attention,
    set_mlp,
    set_norm,
    set_position,
    set_qk_norm,
    set_weight_tying,
)
from spotrun.train.state import State
from spotrun.train.wrapping import unwrap_model


def require_gpt(model: nn.Module, method: str) -> GPT:
    if not isinstance(model, GPT):
        raise UsageError(
            f"method {method} needs the GPT model (model=gpt); {type(model).__name__} is not one",
            hint=f"switch it off with --set methods.{method}=null",
        )
    return model


def tie_weights(model: GPT) -> Swap:
    """The output layer shares the token embedding matrix (Press & Wolf, 2017)."""
    return set_weight_tying(model, True)


def _params(tensors: list[torch.Tensor]) -> list[nn.Parameter]:
    return [t for t in tensors if isinstance(t, nn.Parameter)]


class _GptSurgery(AlgorithmBase):
    events = frozenset({Event.INIT})

    def change(self, model: GPT) -> Swap:  # pragma: no cover - abstract
        raise NotImplementedError

    def apply(self, event: Event, state: State) -> None:
        removed, added = self.change(require_gpt(unwrap_model(state.model), self.name))
        swap_parameters(state.optimizer, _params(removed), _params(added))


class Rotary(_GptSurgery):
    name = "rotary"

    def __init__(self, options: RotaryOptions) -> None:
        self.options = options

    def change(self, model: GPT) -> Swap:
        return set_position(model, "rotary", rotary_base=self.options.base)


class Alibi(_GptSurgery):
    name = "alibi"

    def __init__(self, options: NoOptions) -> None:
        self.options = options

    def change(self, model: GPT) -> Swap:
        return set_position(model, "alibi")


class RmsNorm(_GptSurgery):
    name = "rms_norm"

    def __init__(self, options: RmsNormOptions) -> None:
        self.options = options

    def change(self, model: GPT) -> Swap:
        return set_norm(model, "rms", eps=self.options.eps)


class SwiGlu(_GptSurgery):
    name = "swiglu"

    def __init__(self, options: NoOptions) -> None:
        self.options = options

    def change(self, model: GPT) -> Swap:
        return set_mlp(model, "swiglu")


class QkNorm(_GptSurgery):
    name = "qk_norm"

    def __init__(self, options: NoOptions) -> None:
        self.options = options

    def change(self, model: GPT) -> Swap:
        return set_qk_norm(model, True)


class WeightTying(_GptSurgery):
    name = "weight_tying"

    def __init__(self, options: NoOptions) -> None:
        self.options = options

    def change(self, model: GPT) -> Swap:
        return tie_weights(model)


class FusedAttention(_GptSurgery):
    name = "fused_attention"

    def __init__(self, options: NoOptions) -> None:
        self.options = options

    def change(self, model: GPT) -> Swap:
        return set_attention(model, "fused")
