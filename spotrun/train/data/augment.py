"""Augmentation of whole image batches on the training device.

Each function takes an N x C x H x W tensor of any dtype (uint8 straight from the cache works)
and returns one of the same shape and dtype, except `resize_images`, which changes H x W.
Random choices come from the torch generator passed in (the global one when None); the batch
sources pass a generator seeded by (seed, epoch, batch, rank), so every batch's augmentation is
fixed by its position and a resumed run draws exactly what an unbroken one would have. The
random numbers are drawn on the CPU (a few per image) and only the image work runs on the
device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

PaddingMode = Literal["reflect", "zeros"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def batch_generator(seed: int, epoch: int, batch: int, rank: int = 0) -> torch.Generator:
    """A CPU generator whose stream depends only on the batch's position in training."""
    mixed = ((seed * 1_000_003 + epoch) * 1_000_033 + batch) * 1_009 + rank
    return torch.Generator().manual_seed(mixed % (2**63))


def _reflect(index: torch.Tensor, size: int) -> torch.Tensor:
    """Mirror indices that fall outside 0..size-1 back inside (edge pixel not repeated)."""
    index = index.abs()
    return torch.where(index > size - 1, 2 * (size - 1) - index, index)


class _SourceMap:
    """Where each output pixel of each image comes from: a source row per output row and a
    source column per output column, and whether that source lies inside the image (outside
    reads as zero). Moves are added from the output backwards (the last move of the image
    pipeline first), then all are applied in one gather pass."""

    def __init__(self, n: int, h: int, w: int) -> None:
        self.h, self.w = h, w
        self.rows = torch.arange(h).repeat(n, 1)  # n x h
        self.cols = torch.arange(w).repeat(n, 1)  # n x w
        self.keep_rows: torch.Tensor | None = None
        self.keep_cols: torch.Tensor | None = None

    def shift(self, dy: torch.Tensor, dx: torch.Tensor, padding_mode: PaddingMode) -> None:
        """Output (i, j) reads what was at (i + dy, j + dx) before this move."""
        if len(dy) and (int(dy.abs().max()) >= self.h or int(dx.abs().max()) >= self.w):
            raise ValueError(f"shifts must stay below the image size ({self.h}x{self.w})")
        rows, cols = self.rows + dy[:, None], self.cols + dx[:, None]
        if padding_mode == "reflect":
            self.rows, self.cols = _reflect(rows, self.h), _reflect(cols, self.w)
            return
        inside_rows = (rows >= 0) & (rows < self.h)
        inside_cols = (cols >= 0) & (cols < self.w)
        self.keep_rows = inside_rows if self.keep_rows is None else self.keep_rows & inside_rows
        self.keep_cols = inside_cols if self.keep_cols is None else self.keep_cols & inside_cols
        self.rows, self.cols = rows.clamp(0, self.h - 1), cols.clamp(0, self.w - 1)

    def mirror(self, flip: torch.Tensor) -> None:
        """Output column j reads what was at column w-1-j before this move, where `flip`."""
        self.cols = torch.where(flip[:, None], self.w - 1 - self.cols, self.cols)

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        flat = (self.rows[:, :, None] * w + self.cols[:, None, :]).view(n, 1, h * w)
        out = x.reshape(n, c, h * w).gather(2, flat.to(x.device).expand(n, c, h * w))
        out = out.view(n, c, h, w)
        if self.keep_rows is None or self.keep_cols is None:
            return out
        keep = self.keep_rows[:, None, :, None] & self.keep_cols[:, None, None, :]
        return out * keep.to(device=x.device, dtype=out.dtype)


def shift_images(
    x: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, padding_mode: PaddingMode = "zeros"
) -> torch.Tensor:
    """out[n, :, i, j] = x[n, :, i + dy[n], j + dx[n]]; outside the image: mirrored or zero."""
    source = _SourceMap(*x.shape[:1], *x.shape[2:])
    source.shift(dy, dx, padding_mode)
    return source.apply(x)


def _draw_shifts(
    n: int, limit: int, size: tuple[int, ...], generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    if limit >= min(size):
        raise ValueError(f"padding {limit} must stay below the image size {tuple(size)}")
    dy = torch.randint(-limit, limit + 1, (n,), generator=generator)
    dx = torch.randint(-limit, limit + 1, (n,), generator=generator)
    return dy, dx


def _draw_flips(n: int, generator: torch.Generator | None) -> torch.Tensor:
    return torch.rand(n, generator=generator) < 0.5


def random_crop(
    x: torch.Tensor,
    padding: int,
    *,
    padding_mode: PaddingMode = "reflect",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Pad each image by `padding` pixels, then crop it back to its size at a random offset."""
    if padding == 0:
        return x
    dy, dx = _draw_shifts(x.shape[0], padding, x.shape[-2:], generator)
    return shift_images(x, dy, dx, padding_mode)


def random_translate(
    x: torch.Tensor, max_shift: int, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Shift each image by up to `max_shift` pixels in each direction, filling with zeros."""
    return random_crop(x, max_shift, padding_mode="zeros", generator=generator)


def random_flip(x: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Mirror a random half of the images left to right."""
    flip = _draw_flips(x.shape[0], generator).to(x.device)
    return torch.where(flip[:, None, None, None], x.flip(3), x)


def resize_images(x: torch.Tensor, size: int | tuple[int, int]) -> torch.Tensor:
    """Bilinear resize to `size` (antialiased when shrinking); uint8 stays uint8."""
    target = (size, size) if isinstance(size, int) else size
    if tuple(x.shape[-2:]) == target:
        return x
    shrinking = target[0] < x.shape[-2] or target[1] < x.shape[-1]
    y = F.interpolate(
        x.float(), size=target, mode="bilinear", align_corners=False, antialias=shrinking
    )
    if x.is_floating_point():
        return y.to(x.dtype)
    return y.round_().clamp_(0, 255).to(x.dtype)


def channel_stats(images: torch.Tensor, chunk: int = 4096) -> tuple[list[float], list[float]]:
    """Per-channel mean and standard deviation of uint8 images, as fractions of 255."""
    count = images.shape[0] * images.shape[2] * images.shape[3]
    total = torch.zeros(images.shape[1], dtype=torch.float64)
    squares = torch.zeros_like(total)
    for start in range(0, images.shape[0], chunk):
        part = images[start : start + chunk].to(torch.float64)
        total += part.sum(dim=(0, 2, 3)).cpu()
        squares += part.square().sum(dim=(0, 2, 3)).cpu()
    mean = total / count
    std = (squares / count - mean.square()).clamp_min(0).sqrt()
    return (mean / 255).tolist(), (std / 255).clamp_min(1e-3).tolist()


@dataclass(frozen=True)
class ImagePipeline:
    """uint8 batch in, normalized float32 batch out; random steps only for training."""

    mean: Sequence[float]  # per channel, as fractions of 255
    std: Sequence[float]
    crop_padding: int = 0
    padding_mode: PaddingMode = "reflect"
    translate: int = 0
    flip: bool = False

    def augment(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """Crop, then translate, then flip: the same as calling the three functions in turn
        with draws in that order, done as one gather."""
        if not (self.crop_padding or self.translate or self.flip):
            return x
        n, size = x.shape[0], x.shape[-2:]
        crop = _draw_shifts(n, self.crop_padding, size, generator) if self.crop_padding else None
        shift = _draw_shifts(n, self.translate, size, generator) if self.translate else None
        flip = _draw_flips(n, generator) if self.flip else None
        source = _SourceMap(n, *size)  # built from the output backwards: flip first
        if flip is not None:
            source.mirror(flip)
        if shift is not None:
            source.shift(*shift, "zeros")
        if crop is not None:
            source.shift(*crop, self.padding_mode)
        return source.apply(x)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        mean = torch.tensor(self.mean, dtype=torch.float32, device=x.device) * 255
        scale = 1 / (torch.tensor(self.std, dtype=torch.float32, device=x.device) * 255)
        return (x.float() - mean[:, None, None]) * scale[:, None, None]

    def __call__(
        self,
        x: torch.Tensor,
        *,
        train: bool,
        generator: torch.Generator | None = None,
        size: int | None = None,
    ) -> torch.Tensor:
        if train:
            x = self.augment(x, generator)
        x = self.normalize(x)
        return resize_images(x, size) if size is not None else x
