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


def shift_images(
    x: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, padding_mode: PaddingMode = "zeros"
) -> torch.Tensor:
    """out[n, :, i, j] = x[n, :, i + dy[n], j + dx[n]]; outside the image: mirrored or zero."""
    n, c, h, w = x.shape
    if n and (int(dy.abs().max()) >= h or int(dx.abs().max()) >= w):
        raise ValueError(f"shifts must stay below the image size ({h}x{w})")
    rows = torch.arange(h)[None, :] + dy[:, None]  # n x h source rows
    cols = torch.arange(w)[None, :] + dx[:, None]  # n x w source columns
    if padding_mode == "reflect":
        keep = None
        rows, cols = _reflect(rows, h), _reflect(cols, w)
    else:
        keep = ((rows >= 0) & (rows < h))[:, None, :, None] & ((cols >= 0) & (cols < w))[
            :, None, None, :
        ]
        rows, cols = rows.clamp(0, h - 1), cols.clamp(0, w - 1)
    rows, cols = rows.to(x.device), cols.to(x.device)
    out = x.gather(2, rows[:, None, :, None].expand(n, c, h, w))
    out = out.gather(3, cols[:, None, None, :].expand(n, c, h, w))
    if keep is not None:
        out = out * keep.to(device=x.device, dtype=out.dtype)
    return out


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
    if padding >= min(x.shape[-2:]):
        raise ValueError(f"padding {padding} must stay below the image size {tuple(x.shape[-2:])}")
    n = x.shape[0]
    dy = torch.randint(-padding, padding + 1, (n,), generator=generator)
    dx = torch.randint(-padding, padding + 1, (n,), generator=generator)
    return shift_images(x, dy, dx, padding_mode)


def random_translate(
    x: torch.Tensor, max_shift: int, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Shift each image by up to `max_shift` pixels in each direction, filling with zeros."""
    return random_crop(x, max_shift, padding_mode="zeros", generator=generator)


def random_flip(x: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Mirror a random half of the images left to right."""
    flip = (torch.rand(x.shape[0], generator=generator) < 0.5).to(x.device)
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
        x = random_crop(x, self.crop_padding, padding_mode=self.padding_mode, generator=generator)
        if self.translate:
            x = random_translate(x, self.translate, generator=generator)
        if self.flip:
            x = random_flip(x, generator=generator)
        return x

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
