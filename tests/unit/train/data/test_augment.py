"""Batch augmentation maths: shapes, dtypes, exact pixel moves, determinism under a seed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from spotrun.train.data.augment import (
    ImagePipeline,
    batch_generator,
    channel_stats,
    random_crop,
    random_flip,
    random_translate,
    resize_images,
    shift_images,
)


def images(n: int = 16, size: int = 8, dtype: torch.dtype = torch.uint8) -> torch.Tensor:
    x = torch.randint(0, 256, (n, 3, size, size), generator=torch.Generator().manual_seed(1))
    return x.to(dtype)


@pytest.mark.parametrize("mode", ["reflect", "zeros"])
def test_shift_matches_pad_then_crop(mode: str) -> None:
    x = images(size=6).float()
    dy = torch.tensor([-2, -1, 0, 1, 2, 0, 2, -2] * 2)
    dx = torch.tensor([0, 2, -2, 1, -1, 0, 2, 1] * 2)
    out = shift_images(x, dy, dx, mode)  # type: ignore[arg-type]
    pad = 2
    padded = F.pad(x, (pad,) * 4, mode="reflect" if mode == "reflect" else "constant")
    for n in range(len(x)):
        top, left = pad + int(dy[n]), pad + int(dx[n])
        assert torch.equal(out[n], padded[n, :, top : top + 6, left : left + 6])


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_crop_translate_flip_keep_shape_and_dtype(dtype: torch.dtype) -> None:
    x = images(dtype=dtype)
    g = batch_generator(0, 0, 0)
    for out in (
        random_crop(x, 2, generator=g),
        random_crop(x, 3, padding_mode="zeros", generator=g),
        random_translate(x, 2, generator=g),
        random_flip(x, generator=g),
    ):
        assert out.shape == x.shape and out.dtype == dtype


def test_same_seed_same_augmentation_and_global_rng_untouched() -> None:
    x = images()
    pipeline = ImagePipeline((0.5,) * 3, (0.25,) * 3, crop_padding=2, translate=1, flip=True)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = pipeline(x, train=True, generator=batch_generator(7, 3, 5))
    assert torch.equal(torch.get_rng_state(), before)  # the trainer's stream is not consumed
    torch.manual_seed(999)
    b = pipeline(x, train=True, generator=batch_generator(7, 3, 5))
    assert torch.equal(a, b)
    c = pipeline(x, train=True, generator=batch_generator(7, 3, 6))
    d = pipeline(x, train=True, generator=batch_generator(7, 3, 5, rank=1))
    assert not torch.equal(a, c) and not torch.equal(a, d)


def test_crop_is_a_shift_of_the_original() -> None:
    x = images(n=64, size=8)
    out = random_crop(x, 1, padding_mode="zeros", generator=batch_generator(0, 0, 0))
    seen = set()
    for n in range(len(x)):
        matches = [
            (dy, dx)
            for dy in (-1, 0, 1)
            for dx in (-1, 0, 1)
            if torch.equal(
                out[n], shift_images(x[n : n + 1], torch.tensor([dy]), torch.tensor([dx]))[0]
            )
        ]
        assert matches, f"image {n} is not a shift of its source"
        seen.update(matches)
    assert len(seen) == 9  # every offset in [-1, 1]^2 occurs


def test_translate_fills_with_zeros() -> None:
    x = torch.full((32, 3, 8, 8), 200, dtype=torch.uint8)
    out = random_translate(x, 3, generator=batch_generator(0, 0, 0))
    zeros = (out == 0).flatten(1).sum(1)
    assert (zeros > 0).any() and ((out == 0) | (out == 200)).all()


def test_flip_mirrors_about_half() -> None:
    x = images(n=400)
    out = random_flip(x, generator=batch_generator(0, 0, 0))
    flipped = torch.tensor([torch.equal(o, s.flip(2)) for o, s in zip(out, x)])
    same = torch.tensor([torch.equal(o, s) for o, s in zip(out, x)])
    assert (flipped | same).all()
    assert 150 < int(flipped.sum()) < 250


def test_resize_and_normalize() -> None:
    x = images(size=8)
    assert (
        resize_images(x, 16).shape == (16, 3, 16, 16) and resize_images(x, 16).dtype == torch.uint8
    )
    assert resize_images(x.float(), (4, 6)).shape == (16, 3, 4, 6)
    assert resize_images(x, 8) is x
    flat = torch.full((2, 3, 4, 4), 128, dtype=torch.uint8)
    assert torch.allclose(resize_images(flat.float(), 2), flat[:, :, :2, :2].float())
    pipeline = ImagePipeline((128 / 255,) * 3, (64 / 255,) * 3)
    out = pipeline(torch.tensor([[[[0, 128, 255]]] * 3], dtype=torch.uint8), train=False, size=None)
    assert out.dtype == torch.float32
    assert torch.allclose(out[0, 0, 0], torch.tensor([-2.0, 0.0, 127 / 64]))
    assert pipeline(x, train=False, size=12).shape == (16, 3, 12, 12)


def test_channel_stats_match_numpy() -> None:
    x = images(n=50, size=5)
    mean, std = channel_stats(x, chunk=7)
    arr = x.numpy().astype(np.float64) / 255
    assert np.allclose(mean, arr.mean(axis=(0, 2, 3)))
    assert np.allclose(std, arr.std(axis=(0, 2, 3)))


def test_shifts_beyond_the_image_are_refused() -> None:
    with pytest.raises(ValueError, match="below the image size"):
        random_crop(images(size=4), 4)


@pytest.mark.parametrize("mode", ["reflect", "zeros"])
def test_pipeline_equals_the_functions_in_turn(mode: str) -> None:
    x = images(n=64)
    pipeline = ImagePipeline((0.0,) * 3, (1.0,) * 3, 3, mode, translate=2, flip=True)  # type: ignore[arg-type]
    fused = pipeline.augment(x, batch_generator(1, 2, 3))
    g = batch_generator(1, 2, 3)
    one_by_one = random_flip(
        random_translate(random_crop(x, 3, padding_mode=mode, generator=g), 2, generator=g),  # type: ignore[arg-type]
        generator=g,
    )
    assert torch.equal(fused, one_by_one)
