"""Mixed precision: most of the forward pass in 16-bit floats.

bf16 autocast works on CPUs and GPUs and needs no loss scaling (bf16 has float32's range).
fp16 autocast is for GPUs; its narrow range needs a grad scaler, whose state is checkpointed.
precision=auto is decided from the device (spotrun.train.methods.auto): `spotrun train` resolves
it before the method is built; an algorithm given auto directly decides at INIT.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from spotrun.core.errors import UsageError
from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.device import capabilities_of
from spotrun.train.events import Event
from spotrun.train.methods.auto import resolve_one
from spotrun.train.methods.options import MixedPrecisionOptions
from spotrun.train.state import State

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# fp16 is refused elsewhere: CPUs run it slowly, and bf16 does the job there without a scaler.
FP16_DEVICES = frozenset({"cuda"})
SCALER_EVENTS = frozenset(
    {Event.BEFORE_BACKWARD, Event.AFTER_BACKWARD, Event.BEFORE_OPTIMIZER_STEP}
)


def autocast_context(
    device_type: str, precision: Literal["bf16", "fp16"] = "bf16"
) -> torch.autocast:
    """Autocast for `device_type` ("cpu", "cuda") at `precision`.

    Helps: on GPUs with tensor cores, about 2x faster matrix maths and half the activation
    memory; on recent CPUs bf16 helps large convs and matmuls. Cost: lower precision in
    activations (losses and reductions stay float32); fp16 also needs make_grad_scaler.
    Conflicts: fp16 with sam (the scaler would not see SAM's second gradient).
    """
    return torch.autocast(device_type, dtype=DTYPES[precision])


def make_grad_scaler(
    device_type: str = "cuda", *, init_scale: float = 2.0**16, growth_interval: int = 2000
) -> torch.amp.GradScaler:
    """A loss scaler for fp16: scale(loss).backward(); unscale_(opt); step(opt); update()."""
    return torch.amp.GradScaler(device_type, init_scale=init_scale, growth_interval=growth_interval)


class MixedPrecision(AlgorithmBase):
    """Enters autocast before the forward pass and leaves it after the loss; with fp16, scales
    the loss, unscales gradients right after backward (so clipping sees true values) and takes
    the optimizer step through the scaler, which skips steps whose gradients overflowed."""

    name = "mixed_precision"

    def __init__(self, options: MixedPrecisionOptions) -> None:
        self.options = options
        self.precision: str = options.precision  # "auto" until INIT decides
        self.scaler: torch.amp.GradScaler | None = None
        self._active: torch.autocast | None = None
        self.events = frozenset(
            {Event.BEFORE_FORWARD, Event.AFTER_LOSS}
            | ({Event.EVAL_BEFORE_FORWARD, Event.EVAL_AFTER_FORWARD} if options.eval else set())
            | ({Event.INIT, *SCALER_EVENTS} if options.precision in ("fp16", "auto") else set())
        )

    def match(self, event: Event, state: State) -> bool:
        if event not in self.events:
            return False
        if event is Event.INIT:
            return True
        if self.precision == "fp32":
            return False  # chosen by auto or by the recipe: autocast stays off
        return self.scaler is not None or event not in SCALER_EVENTS

    def apply(self, event: Event, state: State) -> None:
        if event is Event.INIT:
            self._init(state)
        elif event in (Event.BEFORE_FORWARD, Event.EVAL_BEFORE_FORWARD):
            self._leave()
            precision: Literal["bf16", "fp16"] = "fp16" if self.precision == "fp16" else "bf16"
            self._active = autocast_context(state.device.type, precision)
            self._active.__enter__()
        elif event in (Event.AFTER_LOSS, Event.EVAL_AFTER_FORWARD):
            self._leave()
        else:
            self._scaled(event, state)

    def _init(self, state: State) -> None:
        if self.precision == "auto":
            caps = capabilities_of(state.device)
            self.precision = resolve_one(self.name, self.options.model_dump(), caps).use
        if self.precision == "fp16":
            if state.device.type not in FP16_DEVICES:
                raise UsageError(
                    f"fp16 mixed precision needs a CUDA GPU; this run is on {state.device.type}",
                    hint="use --set methods.mixed_precision.precision=auto (it picks bf16 or fp32)",
                )
            self.scaler = make_grad_scaler(
                state.device.type,
                init_scale=self.options.init_scale,
                growth_interval=self.options.growth_interval,
            )

    def _scaled(self, event: Event, state: State) -> None:
        assert self.scaler is not None
        if event is Event.BEFORE_BACKWARD:
            assert state.loss is not None
            state.loss = self.scaler.scale(state.loss)
        elif event is Event.AFTER_BACKWARD:
            self.scaler.unscale_(state.optimizer)
        elif event is Event.BEFORE_OPTIMIZER_STEP:
            self.scaler.step(state.optimizer)
            self.scaler.update()
            state.skip_step = True  # the scaler took the step (or dropped it on overflow)

    def _leave(self) -> None:
        if self._active is not None:
            self._active.__exit__(None, None, None)
            self._active = None

    def state_dict(self) -> dict[str, Any]:
        return {"scaler": self.scaler.state_dict()} if self.scaler is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
