"""Decoding one image to a 3 x H x W uint8 array (runs in decoding worker processes).

An image is named by an `ImageRef`: a file path, or (name, encoded bytes) for an image read
out of an archive. Only Pillow and numpy here. Every function returns the array or raises
`DecodeError` naming the image, so a caller can report a broken file instead of a traceback.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import IO

import numpy as np
from PIL import Image, UnidentifiedImageError

ImageRef = str | Path | tuple[str, bytes]

# The eval transform of the ImageNet literature: resize to size / 0.875, then centre-crop.
EVAL_CROP_FRACTION = 0.875
ASPECT_RANGE = (3 / 4, 4 / 3)  # random-resized-crop aspect ratios (log-uniform)


class DecodeError(Exception):
    """An image could not be read or did not have the expected size."""


def ref_name(ref: ImageRef) -> str:
    return ref[0] if isinstance(ref, tuple) else str(ref)


def _stream(ref: ImageRef) -> str | Path | IO[bytes]:
    return io.BytesIO(ref[1]) if isinstance(ref, tuple) else ref


def _open(path: ImageRef, draft: tuple[int, int] | None = None) -> Image.Image:
    try:
        image = Image.open(_stream(path))
        if draft is not None and image.format == "JPEG":
            image.draft("RGB", draft)  # let libjpeg decode at 1/2, 1/4 or 1/8 scale
        return image.convert("RGB")
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise DecodeError(f"cannot decode {ref_name(path)}: {exc}") from exc


def to_chw(image: Image.Image) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(image, dtype=np.uint8).transpose(2, 0, 1))


def image_size(path: ImageRef) -> tuple[int, int]:
    """(height, width) from the file header, without decoding."""
    try:
        with Image.open(_stream(path)) as image:
            width, height = image.size
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise DecodeError(f"cannot read {ref_name(path)}: {exc}") from exc
    return height, width


def decode_exact(path: ImageRef, shape: tuple[int, int]) -> np.ndarray:
    """The image as stored; a DecodeError if it is not `shape` (height, width)."""
    image = _open(path)
    if (image.height, image.width) != shape:
        raise DecodeError(
            f"{ref_name(path)} is {image.height}x{image.width}, the others {shape[0]}x{shape[1]}: "
            "images of mixed sizes need image_size set (--set image_size=N)"
        )
    return to_chw(image)


def decode_center(path: ImageRef, size: int, crop_fraction: float = 1.0) -> np.ndarray:
    """Shorter side resized to size / crop_fraction, then the centre size x size square."""
    height, width = image_size(path)
    scaled = size / crop_fraction
    factor = scaled / min(width, height)
    image = _open(path, draft=(math.ceil(width * factor), math.ceil(height * factor)))
    factor = scaled / min(image.width, image.height)  # the draft may have shrunk it already
    new_w, new_h = max(size, round(image.width * factor)), max(size, round(image.height * factor))
    if (new_w, new_h) != image.size:
        image = image.resize((new_w, new_h), Image.Resampling.BILINEAR, reducing_gap=None)
    left, top = (new_w - size) // 2, (new_h - size) // 2
    return to_chw(image.crop((left, top, left + size, top + size)))


def crop_box(
    width: int, height: int, scale: tuple[float, float], rng: np.random.Generator
) -> tuple[int, int, int, int]:
    """A random-resized-crop box (left, top, w, h): area fraction in `scale`, aspect in 3/4..4/3.

    Ten tries for a box that fits; failing that, the largest centred box of a clamped aspect.
    """
    area = width * height
    log_low, log_high = math.log(ASPECT_RANGE[0]), math.log(ASPECT_RANGE[1])
    for _ in range(10):
        target = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_low, log_high))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1)), w, h
    aspect = min(max(width / height, ASPECT_RANGE[0]), ASPECT_RANGE[1])
    w, h = (
        (width, round(width / aspect))
        if width / height < aspect
        else (round(height * aspect), height)
    )
    w, h = min(w, width), min(h, height)
    return (width - w) // 2, (height - h) // 2, w, h


def decode_random_crop(
    path: ImageRef, size: int, scale: tuple[float, float], rng: np.random.Generator
) -> np.ndarray:
    """A random-resized-crop of the image at size x size (the ImageNet training transform).

    The file is opened once: the header gives the size, the crop box sets the draft scale,
    and an RGB JPEG is resized straight from its reduced-scale decode (no full-image copy).
    """
    try:
        with Image.open(_stream(path)) as image:
            box = draft_box(image, size, crop_box(image.width, image.height, scale, rng))
            rgb = image if image.mode == "RGB" else image.convert("RGB")
            resized = rgb.resize(
                (size, size), Image.Resampling.BILINEAR, box=box, reducing_gap=None
            )
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise DecodeError(f"cannot decode {ref_name(path)}: {exc}") from exc
    return to_chw(resized)


def draft_box(
    image: Image.Image, size: int, box: tuple[int, int, int, int]
) -> tuple[float, float, float, float]:
    """Let libjpeg decode `image` at the smallest scale (1/2, 1/4, 1/8) at which `box`
    (left, top, w, h in full-size pixels) still covers size x size pixels; the box as
    (left, top, right, bottom) in the pixels the decode will have."""
    width, height = image.size
    left, top, w, h = box
    if image.format == "JPEG":
        image.draft("RGB", (math.ceil(width * size / w), math.ceil(height * size / h)))
    sx, sy = image.width / width, image.height / height
    return left * sx, top * sy, (left + w) * sx, (top + h) * sy


def decode_for_device_crop(
    path: ImageRef, size: int, scale: tuple[float, float], rng: np.random.Generator
) -> tuple[np.ndarray, tuple[float, float, float, float]]:
    """The image whole as H x W x 3 uint8 (reduced-scale where its crop allows) and its
    random-resized-crop box (left, top, right, bottom) in that image's pixels.

    The crop and resize are left to the training device (spotrun.train.data.device_crop):
    the worker only decodes, and hands Pillow's buffer over in its own layout (no
    channel-first copy). The box is drawn exactly as `decode_random_crop` draws it.
    """
    try:
        with Image.open(_stream(path)) as image:
            box = draft_box(image, size, crop_box(image.width, image.height, scale, rng))
            rgb = image if image.mode == "RGB" else image.convert("RGB")
            pixels = np.asarray(rgb, dtype=np.uint8)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise DecodeError(f"cannot decode {ref_name(path)}: {exc}") from exc
    return pixels, box
