"""The catalog's methods that change what the model sees: the training batch (its size, its
images, which samples, mixed pairs, a GPT's window length), its targets (label smoothing), and
the evaluation batch (test-time augmentation). Listed here by kind; catalog.py puts every
method in application order."""

from __future__ import annotations

from spotrun.train.methods.catalog_entry import MethodInfo, method_entry
from spotrun.train.methods.options import (
    AugMixOptions,
    ColOutOptions,
    CutMixOptions,
    CutOutOptions,
    LabelSmoothingOptions,
    MixUpOptions,
    ProgressiveResizingOptions,
    RandAugmentOptions,
    SelectiveBackpropOptions,
    SeqLenWarmupOptions,
    TtaOptions,
)

BATCH_METHODS: list[MethodInfo] = [
    method_entry(
        "progressive_resizing",
        "train on smaller images first, growing in a few size buckets",
        ProgressiveResizingOptions,
        "progressive_resizing:ProgressiveResizing",
        "progressive_size",
        "resize_batch",
    ),
    method_entry(
        "selective_backprop",
        "train only on the highest-loss part of each batch, mid-training",
        SelectiveBackpropOptions,
        "selective_backprop:SelectiveBackprop",
        "select_hardest",
    ),
    method_entry(
        "randaugment",
        "each image gets a few random operations (rotate, shear, shift, colour) at one strength",
        RandAugmentOptions,
        "randaugment:RandAugment",
        "randaugment_batch",
    ),
    method_entry(
        "augmix",
        "each image blended with a few chains of random augmentations of itself",
        AugMixOptions,
        "augmix:AugMix",
        "augmix_batch",
    ),
    method_entry(
        "mixup",
        "train on convex combinations of image pairs and their labels",
        MixUpOptions,
        "mixup:MixUp",
        "mixup_batch",
        "mix_targets",
        conflicts=("cutmix",),
    ),
    method_entry(
        "cutmix",
        "paste a box from another image; labels mixed by area",
        CutMixOptions,
        "cutmix:CutMix",
        "cutmix_batch",
        "mix_targets",
        conflicts=("mixup",),
    ),
    method_entry(
        "cutout",
        "zero a random square of each image",
        CutOutOptions,
        "cutout:CutOut",
        "cutout_batch",
    ),
    method_entry(
        "colout",
        "drop random rows and columns of the batch (smaller, faster images)",
        ColOutOptions,
        "colout:ColOut",
        "colout_batch",
    ),
    method_entry(
        "label_smoothing",
        "soft targets (Szegedy et al. 2016)",
        LabelSmoothingOptions,
        "label_smoothing:LabelSmoothing",
        "smooth_labels",
    ),
    method_entry(
        "seq_len_warmup",
        "train on short windows first, growing linearly to the full block_size",
        SeqLenWarmupOptions,
        "seq_len_warmup:SeqLenWarmup",
        "warmup_seq_len",
        "truncate_sequences",
    ),
    method_entry(
        "tta",
        "test-time augmentation: average predictions over flips and shifts",
        TtaOptions,
        "tta:TestTimeAugmentation",
        "tta_logits",
    ),
]
