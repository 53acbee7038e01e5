"""Progressive resizing (fast.ai's DAWNBench entries; Composer): small images first.

Early in training, coarse features are learned as well from low-resolution images, which cost
a fraction of the compute. Sizes come in a few buckets so a compiled model meets few shapes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import ProgressiveResizingOptions
from spotrun.train.state import State


def bucket_sizes(full: int, initial_scale: float, buckets: int, size_multiple: int) -> list[int]:
    """The `buckets` sides, growing evenly from full * initial_scale to full (exactly)."""
    sizes = []
    for i in range(buckets):
        scale = initial_scale + (1.0 - initial_scale) * i / max(1, buckets - 1)
        side = int(full * scale) // size_multiple * size_multiple
        sizes.append(min(full, max(size_multiple, side)))
    sizes[-1] = full
    return sizes


def progressive_size(
    full: int,
    progress: float,
    *,
    initial_scale: float = 0.5,
    delay_frac: float = 0.0,
    finish_frac: float = 0.6,
    buckets: int = 4,
    size_multiple: int = 4,
) -> int:
    """The image side to train on at `progress` (0..1) for images whose side is `full`.

    Until delay_frac the smallest bucket; from finish_frac on the full size; between, the
    buckets in equal shares of the window. Helps: roughly 1/scale^2 cheaper early epochs for
    conv nets, at little accuracy cost when it ends well before training does. Cost: one
    interpolation per batch. Conflicts: none; with colout the two shrink images together.
    """
    frac = (progress - delay_frac) / max(1e-12, finish_frac - delay_frac)
    frac = min(max(frac, 0.0), 1.0)
    sizes = bucket_sizes(full, initial_scale, buckets, size_multiple)
    return sizes[min(buckets - 1, int(frac * (buckets - 1) + 1e-9))]


def resize_batch(
    inputs: torch.Tensor, size: tuple[int, int], mode: str = "bilinear"
) -> torch.Tensor:
    """NCHW images resized to `size` (antialiased when shrinking with a smooth mode)."""
    if tuple(inputs.shape[-2:]) == tuple(size):
        return inputs
    smooth = mode in ("bilinear", "bicubic")
    shrinking = size[0] < inputs.shape[-2] or size[1] < inputs.shape[-1]
    return F.interpolate(
        inputs,
        size=size,
        mode=mode,
        align_corners=False if smooth else None,
        antialias=smooth and shrinking,
    )


class ProgressiveResizing(AlgorithmBase):
    name = "progressive_resizing"
    events = frozenset({Event.AFTER_DATALOADER})

    def __init__(self, options: ProgressiveResizingOptions) -> None:
        self.options = options

    def size_at(self, full: int, progress: float) -> int:
        o = self.options
        return progressive_size(
            full,
            progress,
            initial_scale=o.initial_scale,
            delay_frac=o.delay_frac,
            finish_frac=o.finish_frac,
            buckets=o.buckets,
            size_multiple=o.size_multiple,
        )

    def apply(self, event: Event, state: State) -> None:
        assert state.inputs is not None
        h, w = state.inputs.shape[-2:]
        size = (self.size_at(h, state.progress), self.size_at(w, state.progress))
        state.inputs = resize_batch(state.inputs, size, self.options.mode)
