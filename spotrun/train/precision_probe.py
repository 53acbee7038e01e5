"""Is bf16 faster than fp32 on this CPU? Measured, before training, on the run's own model.

A CPU that flags avx512_bf16 computes bf16 in hardware, but that does not make it faster than
fp32: on an Intel Xeon with AVX512_BF16 and no AMX, cifar10-fast at 1/4 width took 0.136 s a
step in bf16 + channels_last against 0.110 s in fp32 + channels_last (bench/precision_auto.py),
while on a Zen 5 EPYC with the same flag bf16 was the fast path. The flags cannot tell the two
apart, so `mixed_precision: auto` on such a CPU times a few training steps of the recipe's
model (forward and backward on random images of the run's shape, fp32 and bf16 interleaved)
and takes bf16 only where it wins clearly. The figures go into the run's device.json, so a
resume on the same device makes the same choice without measuring again.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from spotrun.train.data.batches import ImageBatches
from spotrun.train.data.memory import TensorBatches
from spotrun.train.device import PrecisionProbe

PROBE_IMAGES = 32  # per step: enough for the convolutions' real kernels, small enough to be quick
ROUNDS = 3  # timed steps of each precision, after two warm-up steps each
BUDGET_S = 20.0  # a model too big for this CPU stops measuring after the first timed round


def _step_seconds(model: nn.Module, images: torch.Tensor, bf16: bool) -> float:
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = model(images)
    # Any scalar of the output will do: the step's time does not depend on the loss.
    out.float().square().mean().backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def probe_cpu_precision(
    make_model: Callable[[], nn.Module],
    image_shape: tuple[int, int, int],
    *,
    fp32_channels_last: bool,
    images: int = PROBE_IMAGES,
    rounds: int = ROUNDS,
    budget_s: float = BUDGET_S,
) -> PrecisionProbe:
    """Time training steps of `make_model()` on `images` random C x H x W images, fp32 (NHWC
    if `fp32_channels_last`) against bf16 (NHWC, oneDNN's bf16 layout), interleaved.

    The global torch random state is left as it was (the model is built and the images drawn
    inside a forked state), so a run's initial weights and data order do not change."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        fp32_model = make_model().train()
        bf16_model = copy.deepcopy(fp32_model).to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        x = torch.randn(images, *image_shape)
    x_bf16 = x.contiguous(memory_format=torch.channels_last)
    x_fp32 = x_bf16 if fp32_channels_last else x
    if fp32_channels_last:
        fp32_model = fp32_model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    started = time.perf_counter()
    for _ in range(2):  # warm-up: oneDNN picks and caches its kernels, the allocator settles
        _step_seconds(fp32_model, x_fp32, bf16=False)
        _step_seconds(bf16_model, x_bf16, bf16=True)
    fp32: list[float] = []
    bf16: list[float] = []
    for _ in range(rounds):
        fp32.append(_step_seconds(fp32_model, x_fp32, bf16=False))
        bf16.append(_step_seconds(bf16_model, x_bf16, bf16=True))
        if time.perf_counter() - started > budget_s:
            break
    return PrecisionProbe(statistics.median(fp32), statistics.median(bf16), images)


def image_shape_of(train_data: object, image_size: int | None) -> tuple[int, int, int] | None:
    """C x H x W of the training images: from in-memory data (no batch drawn, so nothing of
    the run's order moves) or the recipe's image_size; None where neither tells (text)."""
    if isinstance(train_data, ImageBatches):
        c, h, w = (int(d) for d in train_data.images.shape[1:])
        return (c, train_data.size, train_data.size) if train_data.size else (c, h, w)
    if isinstance(train_data, TensorBatches) and train_data.inputs.dim() == 4:
        c, h, w = (int(d) for d in train_data.inputs.shape[1:])
        return (c, h, w)
    return (3, image_size, image_size) if image_size else None
