"""CIFAR-10 recipes: a plain baseline and the fastest recipe our methods make.

Both read the real CIFAR-10 images (`data=cifar10`: the ImageFolder of JPEGs or the official
python archive, found in the data folder; or a path). Their stated results come from
bench/cifar10_time_to_accuracy.py, which runs both side by side on the same machine.
"""

from __future__ import annotations

from spotrun.core.config import Resources
from spotrun.recipes.base import Augment, Recipe, Target

# DAWNBench's CIFAR-10 target, and the one airbench's records are measured to.
CIFAR10_TARGET = Target(metric="test_acc", value=0.94)


def cifar10_baseline() -> Recipe:
    return Recipe(
        name="cifar10-baseline",
        description="CIFAR-10, ResNet-18 (CIFAR stem), plain SGD with a step schedule, "
        "crop + flip; no speed-up methods",
        # bench/cifar10_time_to_accuracy.py, 3 seeds side by side with cifar10-fast, 1 torch
        # thread per run on a shared 2-core AMD EPYC (load average 3-10 while it ran).
        result="on CPU at 1/8 width and 6 epochs: 72% test accuracy in a median 381 s of "
        "training (289 CPU-seconds), final 73.2% (72.9-74.0%) over 3 seeds; the full-width "
        "default is unmeasured",
        measured_with="python bench/cifar10_time_to_accuracy.py --data "
        "../shared/data/cifar10-jpeg.tar.gz, which runs: spotrun train cifar10-baseline "
        '--set \'model_options={"stem": "cifar", "width": 8}\' --set epochs=6 '
        "--set threads=1 --set eval_every_epochs=1 --set seed=0|1|2 --set data=...",
        target=CIFAR10_TARGET,
        resources=Resources(gpus=1, gpu_memory_gb=8),
        multi_node=False,
        data="cifar10",
        image_cache="on",
        normalize="dataset",
        # The standard augmentation: zero-pad by 4 px, crop 32 x 32 back at random; mirror half.
        augment=Augment(crop_padding=4, padding_mode="zeros", flip=True),
        model="resnet18",
        model_options={"stem": "cifar", "width": 64},  # 11.2M parameters at 10 classes
        num_classes=10,
        epochs=60,  # of 50,000 training images each
        batch_size=128,  # images per step
        optimizer="sgd",
        lr=0.1,  # per SGD step on the mean loss of a batch of 128
        momentum=0.9,
        nesterov=False,  # plain momentum SGD
        weight_decay=5e-4,  # on every parameter (no_decay_norm_bias is a speed-up method)
        eval_batch_size=1000,
        methods={
            # x0.1 at half and at three quarters of training (He et al., 2016)
            "step_decay": {"milestones": [0.5, 0.75], "gamma": 0.1},
        },
    )


def cifar10_fast() -> Recipe:
    return Recipe(
        name="cifar10-fast",
        description="CIFAR-10 in the airbench style: small fast net with a patch-whitened stem, "
        "one-cycle, label smoothing, EMA, flip TTA; mixed precision and channels_last where "
        "the device computes them fast (auto)",
        # bench/cifar10_time_to_accuracy.py, 3 seeds side by side with cifar10-baseline, 1 torch
        # thread per run on a shared 2-core AMD EPYC with AVX-512 BF16 (load average 3-10),
        # where the recipe ran in bf16 + channels_last (what auto picked there before the probe).
        # bench/precision_auto.py for the AVX2 EPYC.
        result="per hardware class, at 1/4 width on CPU. AMD EPYC with AVX-512 BF16 (Zen 5, 2 "
        "cores; auto: bf16 + channels_last): 72% test accuracy after 2 epochs in a median 88 s "
        "of training (54 CPU-seconds), 4.3x sooner than cifar10-baseline (5.4x in "
        "CPU-seconds), final 76.2% (75.7-76.5%) over 3 seeds. AMD EPYC with AVX2 only (auto: "
        "fp32 + channels_last): bf16 is emulated there, 11x slower per step than fp32 "
        "(bench/precision_auto.py); 81.1% after 4 epochs, 80% in 808-828 s of training "
        "(bench/precision_time_to_accuracy.py). CPUs with bf16 but no AMX: auto times both "
        "precisions when the run starts and keeps the faster. GPUs: "
        "unmeasured (bench/gpu_benchmark.py)",
        measured_with="python bench/cifar10_time_to_accuracy.py --data "
        "../shared/data/cifar10-jpeg.tar.gz, which runs: spotrun train cifar10-fast "
        "--set 'model_options={\"widths\": [16, 64, 64]}' --set epochs=2 --set threads=1 "
        "--set eval_every_epochs=1 --set seed=0|1|2 --set data=...",
        target=CIFAR10_TARGET,
        resources=Resources(gpus=1, gpu_memory_gb=16),
        multi_node=False,
        data="cifar10",
        image_cache="on",
        normalize="dataset",
        # Reflect-pad by 2 px and crop back (airbench's translate), mirror half the images.
        augment=Augment(crop_padding=2, padding_mode="reflect", flip=True),
        model="cifar-fastnet",
        model_options={"widths": [64, 256, 256]},  # 1.97M parameters, airbench94's widths
        num_classes=10,
        # Full width to 94% is unmeasured (no GPU yet): bench/gpu_benchmark.py measures it.
        epochs=12,
        batch_size=128,  # images per step: at 2-epoch budgets 128 beat 256 and 512 (CPU runs)
        optimizer="sgd",
        lr=0.2,  # peak of the one-cycle schedule, per step on the mean loss of 128 images
        momentum=0.9,  # cycled 0.95 -> 0.85 -> 0.95 by one_cycle
        nesterov=True,
        weight_decay=5e-4,  # on conv and linear weights only (no_decay_norm_bias)
        eval_batch_size=1000,
        methods={
            "one_cycle": {"warmup_frac": 0.25, "start_div": 25.0, "final_div": 100.0},
            # The first layer: fixed filters that whiten 2x2 patches, from 5,000 training images.
            "patch_whitening": {"kernel_size": 2, "num_images": 5000},
            "no_decay_norm_bias": {},
            "label_smoothing": {"smoothing": 0.2},
            # auto: bf16 (or fp16 on V100/T4) and NHWC only where the device has them natively
            # (rules in spotrun/train/device.py); emulated bf16 on an AVX2 CPU was 11x slower.
            "channels_last": {"when": "auto"},  # NHWC only where it helps on the device
            "mixed_precision": {"precision": "auto"},  # bf16 / fp16 / fp32 by the device
            # Averaged weights for evaluation, from 30% of training: 0.9 per update every 5 steps.
            "ema": {"decay": 0.9, "update_every": 5, "start_frac": 0.3},
            "tta": {"flips": True, "translate": 0},  # average with the mirror image
        },
    )
