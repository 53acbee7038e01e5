"""torch.compile as an opt-in: fused kernels for the model's forward and backward passes.

when=auto compiles only where it helps on the device (spotrun.train.device.decide_compile: CUDA
GPUs of compute capability 7.0 and up); when=always compiles everywhere.
"""

from __future__ import annotations

import torch
from torch import nn

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.device import capabilities_of
from spotrun.train.events import Event
from spotrun.train.methods.auto import resolve_one
from spotrun.train.methods.options import CompileOptions
from spotrun.train.state import State


def compile_model(
    model: nn.Module,
    *,
    backend: str = "inductor",
    mode: str = "default",
    dynamic: bool | None = None,
    fullgraph: bool = False,
) -> nn.Module:
    """`torch.compile(model, ...)`; the wrapper shares the model's parameters.

    Helps: 1.2-2x faster steps on GPUs for conv and transformer nets, mostly from fused
    elementwise work. Cost: the first steps (and each new input shape: keep progressive
    resizing to few buckets) pay for compiling, tens of seconds to minutes; inductor on the
    CPU needs a C++ compiler. Conflicts: none known; methods that change shapes or
    requires_grad mid-run (colout, layer_freezing) cause recompiles.
    Resume: compiled kernels may order floating-point sums differently from eager ones, so a
    compiled run is exact on resume only to the extent that the backend is deterministic.
    """
    mode_arg = None if mode == "default" else mode
    compiled: nn.Module = torch.compile(  # type: ignore[assignment]
        model, backend=backend, mode=mode_arg, dynamic=dynamic, fullgraph=fullgraph
    )
    return compiled


class Compile(AlgorithmBase):
    name = "compile"
    # At fit start: after INIT surgery, DDP wrapping and checkpoint loading, which all work on
    # the plain model.
    events = frozenset({Event.FIT_START})

    def __init__(self, options: CompileOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        if hasattr(state.model, "_orig_mod"):
            return  # already compiled (fit called twice)
        if self.options.when == "auto":
            choice = resolve_one(
                self.name, self.options.model_dump(), capabilities_of(state.device)
            )
            if choice.use == "off":
                return
        state.model = compile_model(
            state.model,
            backend=self.options.backend,
            mode=self.options.mode,
            dynamic=self.options.dynamic,
            fullgraph=self.options.fullgraph,
        )
