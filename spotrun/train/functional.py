"""Every speed-up method as a plain function, for use in any PyTorch training loop.

    from spotrun.train import functional as sf
    x, perm, lam = sf.mixup_batch(x, alpha=0.2)
    loss = F.cross_entropy(model(x), sf.mix_targets(y, perm, lam, num_classes=10))

spotrun.train.methods wraps each in a thin Algorithm for the Trainer; the catalog
(`spotrun methods`) maps method names to these functions.
"""

from spotrun.train.methods.agc import adaptive_clip_gradients
from spotrun.train.methods.augmix import augmix_batch, augmix_mix, augmix_weights
from spotrun.train.methods.blurpool import apply_blurpool, blur_2d
from spotrun.train.methods.channels_last import apply_channels_last, to_channels_last
from spotrun.train.methods.colout import colout_batch
from spotrun.train.methods.compile import compile_model
from spotrun.train.methods.concat_pooling import AdaptiveConcatPool2d, apply_concat_pooling
from spotrun.train.methods.cutmix import cutmix_batch
from spotrun.train.methods.cutout import cutout_batch
from spotrun.train.methods.ema import ema_copy, ema_update
from spotrun.train.methods.factorize import apply_factorize, factorize_matrix
from spotrun.train.methods.ghost_batchnorm import apply_ghost_batchnorm, ghost_batch_norm
from spotrun.train.methods.gpt_surgery import tie_weights
from spotrun.train.methods.grad_clipping import clip_gradients
from spotrun.train.methods.label_smoothing import smooth_labels
from spotrun.train.methods.layer_freezing import freeze_layers, frozen_fraction
from spotrun.train.methods.low_precision_norm import (
    apply_low_precision_norm,
    low_precision_group_norm,
    low_precision_layer_norm,
)
from spotrun.train.methods.mixed_precision import autocast_context, make_grad_scaler
from spotrun.train.methods.mixup import mix_targets, mixup_batch
from spotrun.train.methods.no_decay import no_decay_param_groups, split_no_decay
from spotrun.train.methods.patch_whitening import apply_patch_whitening, patch_whitening_weights
from spotrun.train.methods.progressive_resizing import progressive_size, resize_batch
from spotrun.train.methods.randaugment import randaugment_batch
from spotrun.train.methods.sam import sam_perturb, sam_restore
from spotrun.train.methods.schedules import (
    one_cycle_lr,
    one_cycle_momentum,
    step_decay_lr,
    warmup_decay_lr,
)
from spotrun.train.methods.selective_backprop import per_example_loss, select_hardest
from spotrun.train.methods.seq_len_warmup import truncate_sequences, warmup_seq_len
from spotrun.train.methods.squeeze_excite import apply_squeeze_excite, squeeze_excite
from spotrun.train.methods.stochastic_depth import apply_stochastic_depth
from spotrun.train.methods.swa import swa_update
from spotrun.train.methods.tta import tta_logits, tta_views
from spotrun.train.methods.weight_standardization import (
    apply_weight_standardization,
    standardize_weight,
)
from spotrun.train.methods.zero_init_residual import zero_init_residual
from spotrun.train.models.base import stochastic_residual
from spotrun.train.models.transformer_ops import (
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    causal_attention,
    qk_normalize,
    rms_norm,
    rotary_tables,
    swiglu,
)

__all__ = [
    "apply_factorize",
    "factorize_matrix",
    "augmix_batch",
    "augmix_mix",
    "augmix_weights",
    "randaugment_batch",
    "apply_low_precision_norm",
    "low_precision_group_norm",
    "low_precision_layer_norm",
    "apply_squeeze_excite",
    "squeeze_excite",
    "standardize_weight",
    "apply_weight_standardization",
    "swa_update",
    "ghost_batch_norm",
    "apply_ghost_batchnorm",
    "adaptive_clip_gradients",
    "AdaptiveConcatPool2d",
    "alibi_bias",
    "alibi_slopes",
    "apply_blurpool",
    "apply_channels_last",
    "apply_concat_pooling",
    "apply_patch_whitening",
    "apply_rotary",
    "apply_stochastic_depth",
    "autocast_context",
    "blur_2d",
    "causal_attention",
    "clip_gradients",
    "colout_batch",
    "compile_model",
    "cutmix_batch",
    "cutout_batch",
    "ema_copy",
    "ema_update",
    "freeze_layers",
    "frozen_fraction",
    "make_grad_scaler",
    "mix_targets",
    "mixup_batch",
    "no_decay_param_groups",
    "one_cycle_lr",
    "one_cycle_momentum",
    "patch_whitening_weights",
    "per_example_loss",
    "progressive_size",
    "qk_normalize",
    "resize_batch",
    "rms_norm",
    "rotary_tables",
    "sam_perturb",
    "sam_restore",
    "select_hardest",
    "smooth_labels",
    "split_no_decay",
    "step_decay_lr",
    "stochastic_residual",
    "swiglu",
    "tie_weights",
    "to_channels_last",
    "truncate_sequences",
    "tta_logits",
    "tta_views",
    "warmup_decay_lr",
    "warmup_seq_len",
    "zero_init_residual",
]
