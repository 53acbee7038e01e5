"""ImageNet recipes: the standard 90-epoch ResNet-50 baseline and the fast ResNet-50/101 family.

`data=imagenet` is an ImageFolder (train/ and val/ of 1,000 class folders) found in the data
folder, or a path, or an s3:// set from `spotrun data push`. Pushed with `--max-side 256` its
training images are stored training-ready, and on a GPU the streamed loader then only decodes
them and cuts the random-resized crops on the GPU (spotrun/recipes/README.md, "ImageNet-sized
JPEG decoding per core": 4.75x plain decoding per core at 224 px on the machine measured).
None of these can be measured on a machine without ImageNet and GPUs, and
their stated results say so: they name what each recipe is modelled on and what has (and has
not) been measured. bench/gpu_benchmark.py measures the fast recipe's images per second at each
progressive size on synthetic data when a GPU machine is at hand.
"""

from __future__ import annotations

from spotrun.core.config import Resources
from spotrun.recipes.base import Augment, Recipe, Target

# Top-1 on the 50,000 validation images: MLPerf's ResNet-50 target, and about what a 90-epoch
# ResNet-101 reaches.
RESNET50_TARGET = Target(metric="test_acc", value=0.759)
RESNET101_TARGET = Target(metric="test_acc", value=0.77)

GPUS = 8
GLOBAL_BATCH = 1024  # images per step, on any number of GPUs
DEVICE_BATCH = 128  # images one GPU computes at once: 8 GPUs x 128, or 4 x 128 x 2 accumulated

# Random-resized-crop of 8%-100% of the image area and a mirror half the time: the standard
# ImageNet training augmentation (Szegedy et al., 2015), done while decoding.
IMAGENET_AUGMENT = Augment(crop_scale=(0.08, 1.0), flip=True)


def resnet50_baseline() -> Recipe:
    return Recipe(
        name="resnet50-baseline",
        description="ImageNet, ResNet-50, the standard 90-epoch recipe: SGD 0.1 x batch/256, "
        "x0.1 at epochs 30/60/80, 224 px; no speed-up methods",
        result="unmeasured: spotrun's developers have no ImageNet or GPUs. This is the recipe "
        "of Goyal et al. (2017): steps at epochs 30/60/80, 0.1 per 256 images, 5 warmup "
        "epochs; they report 23.6% top-1 error (76.4% accuracy) for it at 256 images per step "
        "and 23.7% at 8,192",
        measured_with="not yet measured; run: spotrun launch resnet50-baseline",
        target=RESNET50_TARGET,
        resources=Resources(gpus=GPUS, gpu_memory_gb=24),
        data="imagenet",
        image_size=224,  # random-resized-crop side
        eval_image_size=224,  # centre crop of the image resized to 256 (224 / 0.875)
        normalize="imagenet",
        augment=IMAGENET_AUGMENT,
        model="resnet50",
        model_options={"stem": "imagenet", "width": 64},  # 25,557,032 parameters
        num_classes=1000,
        epochs=90,
        batch_size=GLOBAL_BATCH,
        device_batch=DEVICE_BATCH,
        eval_batch_size=250,
        optimizer="sgd",
        lr=0.1 * GLOBAL_BATCH / 256,  # 0.4: 0.1 per 256 images (linear scaling)
        momentum=0.9,
        nesterov=False,
        weight_decay=1e-4,  # on every parameter
        methods={
            "step_decay": {
                "milestones": [30 / 90, 60 / 90, 80 / 90],  # epochs 30, 60 and 80 of 90
                "gamma": 0.1,
                "warmup_frac": 5 / 90,  # 5 epochs: 1,024 images per step needs it
            },
        },
    )


def _fast_resnet(depth: int, *, epochs: int, result: str) -> Recipe:
    return Recipe(
        name=f"resnet{depth}-fast",
        description=f"ImageNet, ResNet-{depth}: progressive resizing 128 -> 224 px with a 256 "
        "px final test, warmup + cosine decay, label smoothing, BlurPool, EMA, mixed "
        "precision (auto: bf16 on compute capability >= 8.0, fp16 on V100/T4) and channels_last",
        result=result,
        measured_with="not yet measured (no GPU lent so far): python bench/gpu_benchmark.py "
        "measures images/s at each progressive size on synthetic data on an NVIDIA GPU; "
        "accuracy needs ImageNet: spotrun launch " + f"resnet{depth}-fast",
        target=RESNET50_TARGET if depth == 50 else RESNET101_TARGET,
        resources=Resources(gpus=GPUS, gpu_memory_gb=24),
        data="imagenet",
        # Decoded at 224 px; progressive_resizing shrinks the batches to 128 px at first.
        image_size=224,
        # Tested larger than trained (Touvron et al., 2019, "FixRes"): random-resized crops
        # make objects look bigger in training than in a centre crop of the same size.
        eval_image_size=256,
        normalize="imagenet",
        augment=IMAGENET_AUGMENT,
        model=f"resnet{depth}",
        model_options={"stem": "imagenet", "width": 64},
        num_classes=1000,
        epochs=epochs,
        batch_size=GLOBAL_BATCH,
        device_batch=DEVICE_BATCH,
        eval_batch_size=250,
        optimizer="sgd",
        lr=0.256 * GLOBAL_BATCH / 256,  # peak 1.024: 0.256 per 256 images, as NVIDIA's
        # and Composer's ResNet-50 recipes use with a cosine schedule
        momentum=0.9,
        nesterov=True,
        weight_decay=5e-5,  # on conv and linear weights only (no_decay_norm_bias): short
        # schedules with label smoothing decay less than the baseline's 1e-4
        methods={
            # 5 warmup epochs (for 1,024 images per step), then a cosine down to 0.
            "warmup_decay": {"warmup_frac": 5 / epochs, "decay": "cosine", "final_frac": 0.0},
            # 128 px for the first 35% of training and 160, 192 px in turn until 85%; the last
            # 15% at 224 px. Early epochs cost about (128/224)^2 = 1/3 as much.
            "progressive_resizing": {
                "initial_scale": 128 / 224,
                "delay_frac": 0.35,
                "finish_frac": 0.85,
                "buckets": 4,
                "size_multiple": 32,
            },
            "blurpool": {"replace_convs": True, "replace_maxpools": True, "min_channels": 16},
            "zero_init_residual": {},
            "no_decay_norm_bias": {},
            "label_smoothing": {"smoothing": 0.1},
            "channels_last": {"when": "auto"},  # NHWC only where it helps on the device
            "mixed_precision": {"precision": "auto"},  # bf16 / fp16 / fp32 by the device
            # Half-life of 100 steps, updated every 20 (Composer's mild recipe): 0.5^(20/100).
            "ema": {"decay": 0.87, "update_every": 20},
        },
    )


def resnet50_fast() -> Recipe:
    return _fast_resnet(
        50,
        epochs=36,
        result="accuracy unmeasured: spotrun's developers have no ImageNet. Modelled on "
        "Composer's ResNet-50 'mild' recipe (36 epochs; BlurPool, EMA, label smoothing, "
        "progressive resizing, channels_last, mixed precision) and FFCV's ResNet-50 "
        "configurations (low-resolution training, a higher-resolution test); the 75.9% target "
        "is MLPerf's",
    )


def resnet101_fast() -> Recipe:
    return _fast_resnet(
        101,
        epochs=36,
        result="accuracy unmeasured: spotrun's developers have no ImageNet. The resnet50-fast "
        "recipe on ResNet-101, as Composer carries its ResNet-50 recipes over (it reports 3.5x "
        "faster than its ResNet-101 baseline); the 77% target is a little under torchvision's "
        "90-epoch ResNet-101 (77.4%)",
    )
