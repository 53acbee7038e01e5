"""The catalog of speed-up methods: names, typed options, order, conflicts. No torch here.

Launch validates a recipe's methods against this catalog before anything is created, without
paying for importing torch; the trainer imports each method's Algorithm lazily from it.
A method's options are its interface: they are declared together in options.py.
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
from spotrun.train.methods.options import (
    AgcOptions,
    AugMixOptions,
    BlurPoolOptions,
    ChannelsLastOptions,
    ColOutOptions,
    CompileOptions,
    CutMixOptions,
    CutOutOptions,
    EmaOptions,
    FactorizeOptions,
    GhostBatchNormOptions,
    GradClippingOptions,
    LabelSmoothingOptions,
    LayerFreezingOptions,
    MixedPrecisionOptions,
    MixUpOptions,
    NoOptions,
    OneCycleOptions,
    PatchWhiteningOptions,
    ProgressiveResizingOptions,
    RandAugmentOptions,
    RmsNormOptions,
    RotaryOptions,
    SamOptions,
    SelectiveBackpropOptions,
    SeqLenWarmupOptions,
    SqueezeExciteOptions,
    StepDecayOptions,
    StochasticDepthOptions,
    SwaOptions,
    TtaOptions,
    WarmupDecayOptions,
    WeightStandardizationOptions,
)


# ------------------------------------------------------------------ catalog
@dataclass(frozen=True)
class MethodInfo:
    name: str
    summary: str
    options: type[BaseModel]
    algorithm: str  # "module:Class", imported only when a trainer is built
    conflicts: frozenset[str] = frozenset()
    functional: tuple[str, ...] = ()  # its plain functions in spotrun.train.functional


def _m(
    name: str,
    summary: str,
    options: type[BaseModel],
    algorithm: str,
    *functional: str,
    conflicts: tuple[str, ...] = (),
) -> MethodInfo:
    return MethodInfo(
        name,
        summary,
        options,
        f"spotrun.train.methods.{algorithm}",
        frozenset(conflicts),
        functional,
    )


# Catalog order is application order at before-events (reversed for after-events). It is
# chosen so that methods compose: model surgery before the optimizer is regrouped and before
# channels_last and EMA copy the model; batch changes (resize, select, mix, cut) before the
# memory-format conversion; SAM and clipping before the fp16 scaler takes the step; the
# compile wrapper last.
CATALOG: list[MethodInfo] = [
    _m(
        "one_cycle",
        "one-cycle LR with momentum cycling (super-convergence)",
        OneCycleOptions,
        "schedules:OneCycle",
        "one_cycle_lr",
        "one_cycle_momentum",
        conflicts=("warmup_decay", "step_decay"),
    ),
    _m(
        "warmup_decay",
        "linear warmup, then cosine or linear decay",
        WarmupDecayOptions,
        "schedules:WarmupDecay",
        "warmup_decay_lr",
        conflicts=("one_cycle", "step_decay"),
    ),
    _m(
        "step_decay",
        "step schedule: the lr drops by gamma at fixed fractions of training",
        StepDecayOptions,
        "schedules:StepDecay",
        "step_decay_lr",
        conflicts=("one_cycle", "warmup_decay"),
    ),
    _m(
        "patch_whitening",
        "frozen first conv from the eigenvectors of image-patch covariance",
        PatchWhiteningOptions,
        "patch_whitening:PatchWhitening",
        "patch_whitening_weights",
        "apply_patch_whitening",
    ),
    _m(
        "blurpool",
        "anti-aliased downsampling: blur before strided convs and max-pools",
        BlurPoolOptions,
        "blurpool:BlurPool",
        "apply_blurpool",
        "blur_2d",
    ),
    _m(
        "concat_pooling",
        "pool with average and max side by side; the head widens to match",
        NoOptions,
        "concat_pooling:ConcatPooling",
        "apply_concat_pooling",
    ),
    _m(
        "zero_init_residual",
        "start each residual block as the identity (last BN scale 0)",
        NoOptions,
        "zero_init_residual:ZeroInitResidual",
        "zero_init_residual",
    ),
    _m(
        "factorize",
        "wide convs and linears split into two thinner layers (truncated SVD)",
        FactorizeOptions,
        "factorize:Factorize",
        "apply_factorize",
        "factorize_matrix",
    ),
    _m(
        "weight_standardization",
        "every trainable conv filter used with zero mean and unit variance",
        WeightStandardizationOptions,
        "weight_standardization:WeightStandardization",
        "apply_weight_standardization",
        "standardize_weight",
    ),
    _m(
        "squeeze_excite",
        "a squeeze-excite channel gate after every wide conv",
        SqueezeExciteOptions,
        "squeeze_excite:SqueezeExcite",
        "apply_squeeze_excite",
        "squeeze_excite",
    ),
    _m(
        "low_precision_norm",
        "LayerNorm and GroupNorm computed in the autocast dtype, not promoted to float32",
        NoOptions,
        "low_precision_norm:LowPrecisionNorm",
        "apply_low_precision_norm",
        "low_precision_layer_norm",
        "low_precision_group_norm",
    ),
    _m(
        "ghost_batchnorm",
        "BatchNorm statistics per slice of the batch (ghost batches), not the whole batch",
        GhostBatchNormOptions,
        "ghost_batchnorm:GhostBatchNormMethod",
        "apply_ghost_batchnorm",
        "ghost_batch_norm",
    ),
    _m(
        "stochastic_depth",
        "randomly drop residual branches in training, deeper ones more",
        StochasticDepthOptions,
        "stochastic_depth:StochasticDepth",
        "apply_stochastic_depth",
        "stochastic_residual",
    ),
    _m(
        "no_decay_norm_bias",
        "no weight decay on normalisation weights and biases",
        NoOptions,
        "no_decay:NoDecayNormBias",
        "no_decay_param_groups",
        "split_no_decay",
    ),
    _m(
        "layer_freezing",
        "freeze the earliest layers progressively late in training",
        LayerFreezingOptions,
        "layer_freezing:LayerFreezing",
        "freeze_layers",
        "frozen_fraction",
    ),
    _m(
        "progressive_resizing",
        "train on smaller images first, growing in a few size buckets",
        ProgressiveResizingOptions,
        "progressive_resizing:ProgressiveResizing",
        "progressive_size",
        "resize_batch",
    ),
    _m(
        "selective_backprop",
        "train only on the highest-loss part of each batch, mid-training",
        SelectiveBackpropOptions,
        "selective_backprop:SelectiveBackprop",
        "select_hardest",
    ),
    _m(
        "randaugment",
        "each image gets a few random operations (rotate, shear, shift, colour) at one strength",
        RandAugmentOptions,
        "randaugment:RandAugment",
        "randaugment_batch",
    ),
    _m(
        "augmix",
        "each image blended with a few chains of random augmentations of itself",
        AugMixOptions,
        "augmix:AugMix",
        "augmix_batch",
    ),
    _m(
        "mixup",
        "train on convex combinations of image pairs and their labels",
        MixUpOptions,
        "mixup:MixUp",
        "mixup_batch",
        "mix_targets",
        conflicts=("cutmix",),
    ),
    _m(
        "cutmix",
        "paste a box from another image; labels mixed by area",
        CutMixOptions,
        "cutmix:CutMix",
        "cutmix_batch",
        "mix_targets",
        conflicts=("mixup",),
    ),
    _m(
        "cutout",
        "zero a random square of each image",
        CutOutOptions,
        "cutout:CutOut",
        "cutout_batch",
    ),
    _m(
        "colout",
        "drop random rows and columns of the batch (smaller, faster images)",
        ColOutOptions,
        "colout:ColOut",
        "colout_batch",
    ),
    _m(
        "label_smoothing",
        "soft targets (Szegedy et al. 2016)",
        LabelSmoothingOptions,
        "label_smoothing:LabelSmoothing",
        "smooth_labels",
    ),
    _m(
        "channels_last",
        "NHWC memory format for convolutions (faster on tensor cores)",
        ChannelsLastOptions,
        "channels_last:ChannelsLast",
        "apply_channels_last",
    ),
    _m(
        "sam",
        "sharpness-aware minimisation: step with the gradient at a nearby worse point",
        SamOptions,
        "sam:Sam",
        "sam_perturb",
        "sam_restore",
    ),
    _m(
        "grad_clipping",
        "clip the global gradient norm (or each value)",
        GradClippingOptions,
        "grad_clipping:GradClipping",
        "clip_gradients",
    ),
    _m(
        "agc",
        "adaptive gradient clipping: each unit's gradient bounded relative to its weight",
        AgcOptions,
        "agc:AdaptiveGradClipping",
        "adaptive_clip_gradients",
    ),
    _m(
        "mixed_precision",
        "autocast: auto picks bf16, fp16 (with a grad scaler) or fp32 from the device",
        MixedPrecisionOptions,
        "mixed_precision:MixedPrecision",
        "autocast_context",
        "make_grad_scaler",
    ),
    _m(
        "ema",
        "exponential moving average of the weights, used for evaluation",
        EmaOptions,
        "ema:Ema",
        "ema_copy",
        "ema_update",
    ),
    _m(
        "swa",
        "stochastic weight averaging: evaluate the mean of the late-training weights",
        SwaOptions,
        "swa:Swa",
        "swa_update",
        conflicts=("ema",),
    ),
    _m(
        "tta",
        "test-time augmentation: average predictions over flips and shifts",
        TtaOptions,
        "tta:TestTimeAugmentation",
        "tta_logits",
    ),
    # Language-model methods (need model=gpt): surgery at INIT, then the batch change.
    _m(
        "rotary",
        "rotary position embeddings: positions rotate queries and keys, no position table",
        RotaryOptions,
        "gpt_surgery:Rotary",
        "rotary_tables",
        "apply_rotary",
        conflicts=("alibi",),
    ),
    _m(
        "alibi",
        "ALiBi: a linear distance penalty on attention scores instead of position embeddings",
        NoOptions,
        "gpt_surgery:Alibi",
        "alibi_bias",
        "alibi_slopes",
        conflicts=("rotary",),
    ),
    _m(
        "rms_norm",
        "RMSNorm in place of LayerNorm: no mean, no bias, one reduction",
        RmsNormOptions,
        "gpt_surgery:RmsNorm",
        "rms_norm",
    ),
    _m(
        "swiglu",
        "gated SwiGLU MLP in place of GELU, at the same parameter count",
        NoOptions,
        "gpt_surgery:SwiGlu",
        "swiglu",
    ),
    _m(
        "qk_norm",
        "RMS-normalise queries and keys per head (bounded attention logits)",
        NoOptions,
        "gpt_surgery:QkNorm",
        "qk_normalize",
    ),
    _m(
        "weight_tying",
        "the output layer shares the token embedding matrix",
        NoOptions,
        "gpt_surgery:WeightTying",
        "tie_weights",
    ),
    _m(
        "fused_attention",
        "attention through F.scaled_dot_product_attention (fused kernel)",
        NoOptions,
        "gpt_surgery:FusedAttention",
        "causal_attention",
    ),
    _m(
        "seq_len_warmup",
        "train on short windows first, growing linearly to the full block_size",
        SeqLenWarmupOptions,
        "seq_len_warmup:SeqLenWarmup",
        "warmup_seq_len",
        "truncate_sequences",
    ),
    _m(
        "compile",
        "torch.compile the model (opt-in; the first steps pay for compiling)",
        CompileOptions,
        "compile:Compile",
        "compile_model",
    ),
]

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
