"""The catalog of speed-up methods: names, typed options, order, conflicts. No torch here.

Launch validates a recipe's methods against this catalog before anything is created, without
paying for importing torch; the trainer imports each method's Algorithm lazily from it.
A method's options are its interface: they are declared together in options.py. The entries
are listed by kind (catalog_model.py, catalog_batch.py, catalog_optimization.py); here they are
put in the order they are applied in, and checked together.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from spotrun.core.annotation_words import expected_type
from spotrun.core.config import describe_validation_error
from spotrun.core.errors import UsageError
from spotrun.train.methods.catalog_batch import BATCH_METHODS
from spotrun.train.methods.catalog_entry import MethodInfo
from spotrun.train.methods.catalog_model import MODEL_METHODS
from spotrun.train.methods.catalog_optimization import OPTIMIZATION_METHODS

__all__ = [
    "APPLICATION_ORDER",
    "CATALOG",
    "LANGUAGE_METHODS",
    "METHODS",
    "RULES",
    "CombinationRule",
    "MethodInfo",
    "describe_catalog",
    "validate_methods",
]

# Catalog order is application order at before-events (reversed for after-events). It is
# chosen so that methods compose: model surgery before the optimizer is regrouped and before
# channels_last and EMA copy the model; batch changes (resize, select, mix, cut) before the
# memory-format conversion; SAM and clipping before the fp16 scaler takes the step; the
# compile wrapper last.
APPLICATION_ORDER = (
    # the learning-rate schedule
    "one_cycle",
    "warmup_decay",
    "step_decay",
    # model surgery
    "patch_whitening",
    "blurpool",
    "concat_pooling",
    "zero_init_residual",
    "factorize",
    "weight_standardization",
    "squeeze_excite",
    "low_precision_norm",
    "ghost_batchnorm",
    "stochastic_depth",
    # the optimizer's parameter groups, the layers that train
    "no_decay_norm_bias",
    "layer_freezing",
    # batch changes
    "progressive_resizing",
    "selective_backprop",
    "randaugment",
    "augmix",
    "mixup",
    "cutmix",
    "cutout",
    "colout",
    "label_smoothing",
    # memory format
    "channels_last",
    # the step
    "sam",
    "grad_clipping",
    "agc",
    "mixed_precision",
    # the weights evaluated, and how
    "ema",
    "swa",
    "tta",
    # language-model methods (need model=gpt): surgery at INIT, then the batch change
    "rotary",
    "alibi",
    "rms_norm",
    "swiglu",
    "qk_norm",
    "weight_tying",
    "fused_attention",
    "seq_len_warmup",
    # the compile wrapper last
    "compile",
)
_BY_NAME = {info.name: info for info in (*MODEL_METHODS, *BATCH_METHODS, *OPTIMIZATION_METHODS)}
CATALOG: list[MethodInfo] = [_BY_NAME[name] for name in APPLICATION_ORDER]
METHODS: dict[str, MethodInfo] = {m.name: m for m in CATALOG}
# The methods that need model=gpt (tested on a tiny GPT, not on the tiny image task);
# low_precision_norm needs a LayerNorm or GroupNorm, which of spotrun's models only the GPT has.
LANGUAGE_METHODS = frozenset(
    {
        "low_precision_norm",
        "rotary",
        "alibi",
        "rms_norm",
        "swiglu",
        "qk_norm",
        "weight_tying",
        "fused_attention",
        "seq_len_warmup",
    }
)


@dataclass(frozen=True)
class CombinationRule:
    """A known-bad combination that depends on options, not just on names."""

    methods: tuple[str, ...]
    bad: Callable[[Mapping[str, BaseModel]], bool]
    message: str
    hint: str


RULES: list[CombinationRule] = [
    CombinationRule(
        ("sam", "mixed_precision"),
        lambda o: getattr(o["mixed_precision"], "precision", None) == "fp16",
        "sam cannot be combined with fp16 mixed precision: SAM's second gradient is never "
        "seen by the loss scaler",
        "use --set methods.mixed_precision.precision=bf16, or switch sam off",
    ),
]


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
        options = config[info.name]
        if options is not None and not isinstance(options, Mapping):
            raise UsageError(
                f"method {info.name}: options must be a mapping of option names to values, "
                f"got {options!r}",
                hint=f"e.g. --set methods.{info.name}={{}} for the defaults",
            )
        try:
            parsed.append((info, info.options.model_validate(dict(options or {}))))
        except ValidationError as exc:
            raise UsageError(
                f"method {info.name}: {describe_validation_error(exc)}",
                hint=f"`spotrun methods` lists the options of {info.name}",
            ) from exc
    by_name = {info.name: options for info, options in parsed}
    for rule in RULES:
        if all(m in by_name for m in rule.methods) and rule.bad(by_name):
            raise UsageError(rule.message, hint=rule.hint)
    return parsed


def describe_catalog() -> list[dict[str, Any]]:
    """The catalog as plain data (for `spotrun methods --json` and the docs)."""
    rows = []
    for order, info in enumerate(CATALOG):
        options = []
        for key, field in info.options.model_fields.items():
            options.append(
                {
                    "name": key,
                    "type": expected_type(field.annotation),
                    "default": field.default,
                    "description": field.description or "",
                }
            )
        rows.append(
            {
                "name": info.name,
                "order": order,
                "summary": info.summary,
                "options": options,
                "conflicts": sorted(info.conflicts),
                "functional": [f"spotrun.train.functional.{f}" for f in info.functional],
            }
        )
    return rows
