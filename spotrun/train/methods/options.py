"""The speed-up methods' typed options: each method's interface, declared together. No torch.

The catalog (catalog.py) names each method's options model; a method's Algorithm parses its
options with the same model, so a recipe's options are checked at launch without torch.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from spotrun.core.config import StrictModel


class NoOptions(StrictModel):
    """The method takes no options."""


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


class StepDecayOptions(StrictModel):
    milestones: list[float] = Field(
        [0.5, 0.75], description="fractions of training at which the lr is multiplied by gamma"
    )
    gamma: float = Field(0.1, gt=0, lt=1, description="factor applied at each milestone")
    warmup_frac: float = Field(0.0, ge=0, lt=1, description="linear warmup from 0 to the peak")

    @model_validator(mode="after")
    def _milestones_in_order(self) -> StepDecayOptions:
        m = self.milestones
        if any(not 0 < x < 1 for x in m) or any(a >= b for a, b in zip(m, m[1:])):
            raise ValueError("milestones must be increasing fractions strictly between 0 and 1")
        if m and self.warmup_frac > m[0]:
            raise ValueError("warmup_frac must end at or before the first milestone")
        return self


class PatchWhiteningOptions(StrictModel):
    kernel_size: int = Field(2, ge=1, le=7, description="patch side in pixels")
    num_images: int = Field(5000, ge=1, description="training images the covariance uses")
    eps: float = Field(5e-4, gt=0, description="added to eigenvalues before 1/sqrt")


class BlurPoolOptions(StrictModel):
    replace_convs: bool = Field(True, description="blur before every strided conv")
    replace_maxpools: bool = Field(True, description="max-pool at stride 1, then blur-subsample")
    min_channels: int = Field(16, ge=1, description="leave convs with fewer input channels")


class StochasticDepthOptions(StrictModel):
    drop_rate: float = Field(0.2, gt=0, lt=1, description="drop probability of the last block")
    schedule: Literal["linear", "uniform"] = Field(
        "linear", description="linear: deeper blocks drop more; uniform: all drop_rate"
    )
    mode: Literal["sample", "block"] = Field(
        "sample", description="sample: per-image mask; block: skip the whole block's compute"
    )


class LayerFreezingOptions(StrictModel):
    start_frac: float = Field(0.6, ge=0, lt=1, description="progress at which freezing begins")
    freeze_level: float = Field(0.8, gt=0, le=1, description="fraction of layers frozen at end")


class ProgressiveResizingOptions(StrictModel):
    initial_scale: float = Field(0.5, gt=0, le=1, description="first side = full * scale")
    delay_frac: float = Field(0.0, ge=0, lt=1, description="progress before growing starts")
    finish_frac: float = Field(
        0.6, gt=0, le=1, description="progress at which full size is reached"
    )
    buckets: int = Field(4, ge=2, le=16, description="distinct sizes (compiled graphs reused)")
    size_multiple: int = Field(4, ge=1, description="every size is a multiple of this")
    mode: Literal["bilinear", "bicubic", "nearest", "area"] = "bilinear"

    @model_validator(mode="after")
    def _window(self) -> ProgressiveResizingOptions:
        if self.finish_frac <= self.delay_frac:
            raise ValueError("finish_frac must be greater than delay_frac")
        return self


class SelectiveBackpropOptions(StrictModel):
    start_frac: float = Field(0.5, ge=0, lt=1)
    end_frac: float = Field(0.9, gt=0, le=1)
    keep: float = Field(0.5, gt=0, lt=1, description="fraction of each batch trained on")
    interval: int = Field(2, ge=1, description="select on every interval-th step of the window")
    scale_factor: float = Field(1.0, gt=0, le=1, description="image scale for the scoring pass")

    @model_validator(mode="after")
    def _window(self) -> SelectiveBackpropOptions:
        if self.end_frac <= self.start_frac:
            raise ValueError("end_frac must be greater than start_frac")
        return self


class RandAugmentOptions(StrictModel):
    depth: int = Field(2, ge=1, le=8, description="operations applied to each image")
    magnitude: float = Field(0.3, ge=0, le=1, description="strength of every operation, 0..1")


class AugMixOptions(StrictModel):
    width: int = Field(3, ge=1, le=8, description="augmentation chains mixed per image")
    max_depth: int = Field(3, ge=1, le=8, description="operations per chain: 1 to this")
    magnitude: float = Field(0.3, ge=0, le=1, description="strength of every operation, 0..1")
    alpha: float = Field(1.0, gt=0, description="Dirichlet and Beta concentration")


class MixUpOptions(StrictModel):
    alpha: float = Field(0.2, gt=0, description="lambda ~ Beta(alpha, alpha)")


class CutMixOptions(StrictModel):
    alpha: float = Field(1.0, gt=0, description="box area ~ Beta(alpha, alpha)")


class CutOutOptions(StrictModel):
    size_frac: float = Field(0.5, gt=0, le=1, description="side of the square / image side")
    holes: int = Field(1, ge=1, le=16)


class ColOutOptions(StrictModel):
    p_row: float = Field(0.15, ge=0, lt=1, description="fraction of rows removed")
    p_col: float = Field(0.15, ge=0, lt=1, description="fraction of columns removed")


class LabelSmoothingOptions(StrictModel):
    smoothing: float = Field(0.1, ge=0, lt=1)


class SamOptions(StrictModel):
    rho: float = Field(0.05, gt=0, description="radius of the ascent step")
    interval: int = Field(1, ge=1, description="SAM on every interval-th step, plain SGD between")
    epsilon: float = Field(1e-12, gt=0)


class GradClippingOptions(StrictModel):
    mode: Literal["norm", "value"] = "norm"
    threshold: float = Field(1.0, gt=0, description="max global L2 norm, or max |grad|")


class AgcOptions(StrictModel):
    clipping: float = Field(
        0.01, gt=0, description="max ratio of a unit's gradient norm to its weight norm"
    )
    eps: float = Field(1e-3, gt=0, description="weight norms below this count as this")


class SwaOptions(StrictModel):
    start_frac: float = Field(0.75, ge=0, lt=1, description="progress at which averaging starts")
    update_every: int = Field(1, ge=1, description="steps between snapshots in the average")


class GhostBatchNormOptions(StrictModel):
    ghost_batch_size: int = Field(32, ge=2, description="images per normalisation slice")


class FactorizeOptions(StrictModel):
    min_channels: int = Field(256, ge=1, description="factorize only layers this wide both ways")
    latent: float = Field(
        0.25, gt=0, description="rank: channels, or below 1 a fraction of the smaller side"
    )


class SqueezeExciteOptions(StrictModel):
    min_channels: int = Field(64, ge=1, description="gate only convs with this many outputs")
    latent_channels: float = Field(
        64, gt=0, description="gate width: channels, or below 1 a fraction of the conv's"
    )


class WeightStandardizationOptions(StrictModel):
    eps: float = Field(1e-5, gt=0, description="added to each filter's variance")
    n_last_layers_ignore: int = Field(0, ge=0, description="leave the last convs as they are")


class MixedPrecisionOptions(StrictModel):
    precision: Literal["auto", "bf16", "fp16", "fp32"] = Field(
        "auto",
        description="auto: what the device computes fast (spotrun/train/device.py); bf16: "
        "autocast on CPU or GPU; fp16: GPU only, with a grad scaler; fp32: no autocast",
    )
    init_scale: float = Field(2.0**16, gt=0, description="fp16: first loss scale")
    growth_interval: int = Field(2000, ge=1, description="fp16: steps between scale increases")
    eval: bool = Field(True, description="autocast evaluation too")


class EmaOptions(StrictModel):
    decay: float = Field(0.999, gt=0, lt=1, description="per update: ema = decay*ema + (1-decay)*w")
    update_every: int = Field(1, ge=1, description="steps between updates")
    start_frac: float = Field(0.0, ge=0, lt=1, description="before this, the EMA copies weights")


class TtaOptions(StrictModel):
    flips: bool = Field(True, description="average with the left-right mirrored image")
    translate: int = Field(0, ge=0, le=8, description="also shift by this many pixels")


class ChannelsLastOptions(StrictModel):
    when: Literal["auto", "always"] = Field(
        "auto", description="auto: only where NHWC helps on the device; always: everywhere"
    )


class CompileOptions(StrictModel):
    when: Literal["auto", "always"] = Field(
        "auto", description="auto: only where compiling helps on the device; always: everywhere"
    )
    backend: str = Field("inductor", description="torch.compile backend")
    mode: Literal["default", "reduce-overhead", "max-autotune"] = "default"
    dynamic: bool | None = Field(None, description="None: torch decides")
    fullgraph: bool = False


# Language-model methods (GPT): options.
class RotaryOptions(StrictModel):
    base: float = Field(10_000.0, gt=1, description="wavelength base of the rotation angles")


class RmsNormOptions(StrictModel):
    eps: float = Field(1e-6, gt=0, description="added to the mean square before 1/sqrt")


class SeqLenWarmupOptions(StrictModel):
    min_len: int = Field(16, ge=1, description="tokens per window at the start")
    duration_frac: float = Field(0.3, gt=0, le=1, description="progress at which full length")
    multiple: int = Field(8, ge=1, description="lengths are multiples of this (few shapes)")
