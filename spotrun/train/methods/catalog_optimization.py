"""The catalog's methods that change the optimisation: the learning-rate schedule, the
parameter groups, which layers train, the step (SAM, clipping, mixed precision) and the
weights evaluated (EMA, SWA). Listed here by kind; catalog.py puts every method in
application order."""

from __future__ import annotations

from spotrun.train.methods.catalog_entry import MethodInfo, method_entry
from spotrun.train.methods.options import (
    AgcOptions,
    EmaOptions,
    GradClippingOptions,
    LayerFreezingOptions,
    MixedPrecisionOptions,
    NoOptions,
    OneCycleOptions,
    SamOptions,
    StepDecayOptions,
    SwaOptions,
    WarmupDecayOptions,
)

OPTIMIZATION_METHODS: list[MethodInfo] = [
    method_entry(
        "one_cycle",
        "one-cycle LR with momentum cycling (super-convergence)",
        OneCycleOptions,
        "schedules:OneCycle",
        "one_cycle_lr",
        "one_cycle_momentum",
        conflicts=("warmup_decay", "step_decay"),
    ),
    method_entry(
        "warmup_decay",
        "linear warmup, then cosine or linear decay",
        WarmupDecayOptions,
        "schedules:WarmupDecay",
        "warmup_decay_lr",
        conflicts=("one_cycle", "step_decay"),
    ),
    method_entry(
        "step_decay",
        "step schedule: the lr drops by gamma at fixed fractions of training",
        StepDecayOptions,
        "schedules:StepDecay",
        "step_decay_lr",
        conflicts=("one_cycle", "warmup_decay"),
    ),
    method_entry(
        "no_decay_norm_bias",
        "no weight decay on normalisation weights and biases",
        NoOptions,
        "no_decay:NoDecayNormBias",
        "no_decay_param_groups",
        "split_no_decay",
    ),
    method_entry(
        "layer_freezing",
        "freeze the earliest layers progressively late in training",
        LayerFreezingOptions,
        "layer_freezing:LayerFreezing",
        "freeze_layers",
        "frozen_fraction",
    ),
    method_entry(
        "sam",
        "sharpness-aware minimisation: step with the gradient at a nearby worse point",
        SamOptions,
        "sam:Sam",
        "sam_perturb",
        "sam_restore",
    ),
    method_entry(
        "grad_clipping",
        "clip the global gradient norm (or each value)",
        GradClippingOptions,
        "grad_clipping:GradClipping",
        "clip_gradients",
    ),
    method_entry(
        "agc",
        "adaptive gradient clipping: each unit's gradient bounded relative to its weight",
        AgcOptions,
        "agc:AdaptiveGradClipping",
        "adaptive_clip_gradients",
    ),
    method_entry(
        "mixed_precision",
        "autocast: auto picks bf16, fp16 (with a grad scaler) or fp32 from the device",
        MixedPrecisionOptions,
        "mixed_precision:MixedPrecision",
        "autocast_context",
        "make_grad_scaler",
    ),
    method_entry(
        "ema",
        "exponential moving average of the weights, used for evaluation",
        EmaOptions,
        "ema:Ema",
        "ema_copy",
        "ema_update",
    ),
    method_entry(
        "swa",
        "stochastic weight averaging: evaluate the mean of the late-training weights",
        SwaOptions,
        "swa:Swa",
        "swa_update",
        conflicts=("ema",),
    ),
]
