"""The catalog of speed-up methods: names, typed options, order, conflicts. No torch here.

Launch validates a recipe's methods against this catalog before anything is created, without
paying for importing torch; the trainer imports each method's Algorithm lazily from it.
A method's options are its interface, so they are declared here, next to the others'.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from spotrun.config import StrictModel, describe_validation_error
from spotrun.errors import UsageError


# ------------------------------------------------------------------ options
class OneCycleOptions(StrictModel):
    warmup_frac: float = Field(0.25, gt=0, lt=1, description="fraction of steps rising")
    start_div: float = Field(25.0, gt=1, description="start lr = peak / start_div")
    final_div: float = Field(1e4, gt=1, description="final lr = peak / final_div")
    cycle_momentum: bool = True
    momentum_low: float = Field(0.85, ge=0, lt=1)
    momentum_high: float = Field(0.95, ge=0, lt=1)


class WarmupDecayOptions(StrictModel):
    warmup_frac: float = Field(0.05, ge=0, lt=1)
    decay: Literal["cosine", "linear"] = "cosine"
    final_frac: float = Field(0.0, ge=0, le=1, description="final lr = peak * final_frac")


class LabelSmoothingOptions(StrictModel):
    smoothing: float = Field(0.1, ge=0, lt=1)


# ------------------------------------------------------------------ catalog
@dataclass(frozen=True)
class MethodInfo:
    name: str
    summary: str
    options: type[BaseModel]
    algorithm: str  # "module:Class", imported only when a trainer is built
    conflicts: frozenset[str] = frozenset()


# Catalog order is application order (reversed for after-events).
CATALOG: list[MethodInfo] = [
    MethodInfo(
        "one_cycle",
        "one-cycle LR with momentum cycling (super-convergence)",
        OneCycleOptions,
        "spotrun.train.methods.schedules:OneCycle",
        frozenset({"warmup_decay"}),
    ),
    MethodInfo(
        "warmup_decay",
        "linear warmup, then cosine or linear decay",
        WarmupDecayOptions,
        "spotrun.train.methods.schedules:WarmupDecay",
        frozenset({"one_cycle"}),
    ),
    MethodInfo(
        "label_smoothing",
        "soft targets (Szegedy et al. 2016)",
        LabelSmoothingOptions,
        "spotrun.train.methods.label_smoothing:LabelSmoothing",
    ),
]

METHODS: dict[str, MethodInfo] = {m.name: m for m in CATALOG}


def validate_methods(
    config: Mapping[str, Mapping[str, Any] | None],
) -> list[tuple[MethodInfo, BaseModel]]:
    """(method, parsed options) for each configured method, in catalog order; UsageError if bad."""
    for name in config:
        if name not in METHODS:
            close = difflib.get_close_matches(name, METHODS, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else "`spotrun methods` lists them"
            raise UsageError(f"unknown method '{name}'", hint=hint)
    for name in config:
        clash = METHODS[name].conflicts & set(config)
        if clash:
            raise UsageError(
                f"methods {name} and {', '.join(sorted(clash))} cannot be used together",
                hint=f"switch one off with --set methods.{name}=null",
            )
    parsed = []
    for info in CATALOG:
        if info.name not in config:
            continue
        try:
            options = info.options.model_validate(dict(config[info.name] or {}))
        except ValidationError as exc:
            raise UsageError(f"method {info.name}: {describe_validation_error(exc)}") from exc
        parsed.append((info, options))
    return parsed
