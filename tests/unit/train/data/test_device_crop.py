"""Random-resized crops cut on the device: the same pixels Pillow's crop-and-resize gives, from
the box the worker drew exactly as the in-worker crop draws it, never reading the padding."""

from __future__ import annotations

import io

import numpy as np
import torch
from PIL import Image

from spotrun.train.data.decode import decode_for_device_crop, decode_random_crop
from spotrun.train.data.device_crop import crop_resize, pad_batch


def _pillow_crop(image: np.ndarray, box: tuple[float, ...], size: int) -> np.ndarray:
    resized = Image.fromarray(image).resize(
        (size, size), Image.Resampling.BILINEAR, box=box, reducing_gap=None
    )
    return np.asarray(resized).transpose(2, 0, 1)


def test_crops_match_pillow_and_the_padding_is_never_read() -> None:
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((18, 24), (30, 20))]
    # Upscaling boxes (Pillow's bilinear is then plain bilinear), one reaching both far edges.
    boxes = [(0.0, 0.0, 24.0, 18.0), (3.0, 5.5, 17.0, 29.0)]
    canvas, shapes = pad_batch(images)
    assert canvas.shape == (2, 30, 24, 3) and shapes.tolist() == [[18, 24], [30, 20]]
    out = crop_resize(torch.from_numpy(canvas), torch.tensor(boxes), torch.from_numpy(shapes), 40)
    assert out.shape == (2, 3, 40, 40) and out.dtype == torch.uint8
    for n in range(2):
        want = _pillow_crop(images[n], boxes[n], 40).astype(int)
        assert np.abs(out[n].numpy().astype(int) - want).max() <= 2
    bright = canvas.copy()
    bright[0, 18:], bright[0, :, 24:], bright[1, :, 20:] = 255, 255, 255
    again = crop_resize(torch.from_numpy(bright), torch.tensor(boxes), torch.from_numpy(shapes), 40)
    assert torch.equal(again, out)


def test_the_worker_draws_the_box_the_in_worker_crop_draws() -> None:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (45, 60, 3), dtype=np.uint8)
    smooth = np.asarray(Image.fromarray(pixels).resize((60, 45), Image.Resampling.BOX))
    buffer = io.BytesIO()
    Image.fromarray(smooth).save(buffer, "PNG")  # lossless: both paths decode the same pixels
    ref = ("photo.png", buffer.getvalue())
    for seed in range(4):
        in_worker = decode_random_crop(ref, 64, (0.08, 1.0), np.random.default_rng(seed))
        whole, box = decode_for_device_crop(ref, 64, (0.08, 1.0), np.random.default_rng(seed))
        assert whole.shape == (45, 60, 3)
        canvas, shapes = pad_batch([whole])
        on_device = crop_resize(
            torch.from_numpy(canvas), torch.tensor([box]), torch.from_numpy(shapes), 64
        )
        assert np.abs(on_device[0].numpy().astype(int) - in_worker.astype(int)).max() <= 2
