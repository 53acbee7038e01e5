"""Random-resized crops cut and resized on the training device, for a whole batch at once.

The decoding workers hand over each image whole (H x W x 3 uint8, as Pillow decoded it) with
its crop box; `pad_batch` lays a batch of them on one canvas, and `crop_resize` samples every
box to size x size in one bilinear `grid_sample` on the device. A worker then spends its core
on the JPEG decode alone: on a store made training-ready at push time that is what beats
plain decoding several times over (bench/jpeg_decode.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

Box = tuple[float, float, float, float]  # left, top, right, bottom in the image's pixels


def pad_batch(images: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(N x Hmax x Wmax x 3 canvas with image n at its top-left corner, N x 2 (height, width))."""
    height = max(image.shape[0] for image in images)
    width = max(image.shape[1] for image in images)
    # Rows of bytes: copying an image row is one memcpy, not width copies of 3 bytes.
    canvas = np.zeros((len(images), height, width * 3), dtype=np.uint8)
    for n, image in enumerate(images):
        canvas[n, : image.shape[0], : image.shape[1] * 3] = image.reshape(image.shape[0], -1)
    shapes = np.array([image.shape[:2] for image in images], dtype=np.int64)
    return canvas.reshape(len(images), height, width, 3), shapes


def crop_resize(
    canvas: torch.Tensor, boxes: torch.Tensor, shapes: torch.Tensor, size: int
) -> torch.Tensor:
    """N x 3 x size x size uint8: box n (left, top, right, bottom) of image n resized bilinearly.

    `canvas` is N x H x W x 3 uint8 with image n of shape[n] = (height, width) at its top-left.
    Pixel centres sit where Pillow's resize with a box puts them (align_corners=False), and
    samples are clamped to each image's own edge pixels, so the padding is never blended in.
    """
    n, height, width = canvas.shape[0], canvas.shape[1], canvas.shape[2]
    device = canvas.device
    left, top, right, bottom = boxes.to(device=device, dtype=torch.float32).unbind(1)
    theta = torch.zeros(n, 2, 3, device=device)
    theta[:, 0, 0] = (right - left) / width
    theta[:, 0, 2] = (left + right) / width - 1
    theta[:, 1, 1] = (bottom - top) / height
    theta[:, 1, 2] = (top + bottom) / height - 1
    grid = F.affine_grid(theta, [n, 3, size, size], align_corners=False)
    # Pixel x has its centre at (2x + 1) / W - 1: keep every sample within pixels 0..w-1.
    rows, cols = shapes.to(device=device, dtype=torch.float32).unbind(1)
    x_max = ((2 * cols - 1) / width - 1)[:, None, None]
    y_max = ((2 * rows - 1) / height - 1)[:, None, None]
    grid[..., 0] = torch.minimum(grid[..., 0].clamp(min=1 / width - 1), x_max)
    grid[..., 1] = torch.minimum(grid[..., 1].clamp(min=1 / height - 1), y_max)
    source = canvas.permute(0, 3, 1, 2).float()  # channels-first view: no copy on the host
    out = F.grid_sample(source, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return out.round_().clamp_(0, 255).to(torch.uint8)
