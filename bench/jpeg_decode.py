"""ImageNet-sized JPEG decoding per core: plain Pillow decode + random-resized crop against the
loader's reduced-scale (draft mode) decode, on full-size and on pre-resized files.

Makes its own files: CIFAR-10 training images upscaled to 500x375 and saved at quality 90 (the
size and quality of a typical ImageNet photo), and the same photos pre-resized to a shorter
side of 256 (what a training-ready store would hold for resnet50-fast, whose largest training
crop is 224 px). One process, so the rates are per core; the variants are interleaved over
`--rounds` and the median round is printed beside the CPU line.

    python bench/jpeg_decode.py [--data ../shared/data/cifar10-jpeg.tar.gz] [--images 200]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _env import hardware_line
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spotrun.train.data.decode import crop_box, decode_random_crop, to_chw  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"
SCALE = (0.08, 1.0)  # resnet50-fast's random-resized-crop area range


def make_photos(data: Path, folder: Path, count: int) -> tuple[list[Path], list[Path]]:
    """`count` 500x375 q90 JPEGs from CIFAR-10, and their pre-resized (shorter side 256) twins."""
    full, small = [], []
    with tarfile.open(data) as tar:
        for member in tar:
            if not member.isfile() or not member.name.lower().endswith((".jpg", ".jpeg", ".png")):
                continue
            raw = tar.extractfile(member)
            assert raw is not None
            image = Image.open(io.BytesIO(raw.read())).convert("RGB")
            photo = image.resize((500, 375), Image.Resampling.BICUBIC)
            index = len(full)
            full.append(folder / f"full-{index}.jpg")
            photo.save(full[-1], quality=90)
            small.append(folder / f"small-{index}.jpg")
            photo.resize((341, 256), Image.Resampling.BILINEAR).save(small[-1], quality=90)
            if len(full) == count:
                break
    return full, small


def plain_decode(path: Path, size: int, rng: np.random.Generator) -> np.ndarray:
    """What a loader without reduced-scale decoding does: decode whole, crop, resize."""
    with Image.open(path) as image:
        rgb = image.convert("RGB")
    left, top, w, h = crop_box(rgb.width, rgb.height, SCALE, rng)
    box = (left, top, left + w, top + h)
    return to_chw(rgb.resize((size, size), Image.Resampling.BILINEAR, box=box, reducing_gap=None))


def rate(
    decode: Callable[[Path, int, np.random.Generator], np.ndarray], paths: list[Path], size: int
) -> float:
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    for path in paths:
        decode(path, size, rng)
    return len(paths) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="128,160,192,224")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        full, small = make_photos(args.data, Path(tmp), args.images)

        def draft(path: Path, size: int, rng: np.random.Generator) -> np.ndarray:
            return decode_random_crop(path, size, SCALE, rng)

        variants = {
            "plain Pillow, 500x375": (plain_decode, full),
            "draft decode, 500x375": (draft, full),
            "draft decode, pre-resized 341x256": (draft, small),
        }
        rates: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.rounds):
            for size in sizes:
                for name, (decode, paths) in variants.items():
                    rates.setdefault((name, size), []).append(rate(decode, paths, size))
    print(f"device: {hardware_line()}")
    print(f"{args.images} photos, {args.rounds} rounds, one process (images/s per core)")
    print("| decode | crop px | images/s per core | vs plain |")
    print("|---|--:|--:|--:|")
    for size in sizes:
        plain = statistics.median(rates[("plain Pillow, 500x375", size)])
        for name in variants:
            med = statistics.median(rates[(name, size)])
            print(f"| {name} | {size} | {med:,.0f} | {med / plain:.2f}x |")


if __name__ == "__main__":
    main()
