"""ImageNet-sized JPEG decoding per core: plain Pillow decode + random-resized crop against the
loader's reduced-scale (draft) decode and the training-ready store `data push --max-side`
writes, with the crop cut in the worker or left to the GPU (spotrun.train.data.device_crop).

Makes its own files: CIFAR-10 training images upscaled to 500x375 and saved at quality 90 (the
size and quality of a typical ImageNet photo), and the same photos stored training-ready by the
push code itself (spotrun.datasets.training_ready) at each `--max-sides`. One process, one
thread, so the rates are per core; they are images per CPU-second of this process (wall time
follows the load of a shared machine, CPU time much less; both printed). The variants are
interleaved over `--rounds` and the median round is printed beside the CPU line.

"worker's share, crop on GPU" is what a decoding worker does when the crop is left to the GPU:
decode the stored JPEG whole (draft-reduced where the crop allows), draw the box, and lay the
image on its batch's canvas (pad_batch, in batches of 32; the other variants stack their
crops likewise). The GPU's share (crop_resize) is not
in it; its cost on this CPU is printed apart, to show why the loader does it only on a GPU.

    python bench/jpeg_decode.py [--data ../shared/data/cifar10-jpeg.tar.gz] [--images 150]
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

import torch  # noqa: E402

from spotrun.datasets.manifest import StoredImages  # noqa: E402
from spotrun.datasets.training_ready import training_ready  # noqa: E402
from spotrun.train.data.decode import (  # noqa: E402
    crop_box,
    decode_for_device_crop,
    decode_random_crop,
    to_chw,
)
from spotrun.train.data.device_crop import crop_resize, pad_batch  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"
SCALE = (0.08, 1.0)  # resnet50-fast's random-resized-crop area range
BATCH = 32  # images per canvas in the worker's share
PLAIN = "plain Pillow, 500x375"

Decode = Callable[[list[Path], int, np.random.Generator], None]


def make_photos(data: Path, folder: Path, count: int) -> list[Path]:
    """`count` 500x375 q90 JPEGs from CIFAR-10."""
    full: list[Path] = []
    with tarfile.open(data) as tar:
        for member in tar:
            if not member.isfile() or not member.name.lower().endswith((".jpg", ".jpeg", ".png")):
                continue
            raw = tar.extractfile(member)
            assert raw is not None
            image = Image.open(io.BytesIO(raw.read())).convert("RGB")
            full.append(folder / f"full-{len(full)}.jpg")
            image.resize((500, 375), Image.Resampling.BICUBIC).save(full[-1], quality=90)
            if len(full) == count:
                break
    return full


def store(full: list[Path], folder: Path, form: StoredImages) -> list[Path]:
    """The photos as `data push --max-side` stores them."""
    paths = []
    for path in full:
        ready = training_ready(path, form)
        paths.append(folder / f"ready-{form.max_side}-{form.quality}-{path.name}")
        paths[-1].write_bytes(ready if ready is not None else path.read_bytes())
    return paths


def plain_one(path: Path, size: int, rng: np.random.Generator) -> np.ndarray:
    """What a loader without reduced-scale decoding does: decode whole, crop, resize."""
    with Image.open(path) as image:
        rgb = image.convert("RGB")
    left, top, w, h = crop_box(rgb.width, rgb.height, SCALE, rng)
    box = (left, top, left + w, top + h)
    return to_chw(rgb.resize((size, size), Image.Resampling.BILINEAR, box=box, reducing_gap=None))


# Every variant ends with its batch of 32 as one array, as the loader's collate makes it.
def plain(paths: list[Path], size: int, rng: np.random.Generator) -> None:
    for start in range(0, len(paths), BATCH):
        np.stack([plain_one(p, size, rng) for p in paths[start : start + BATCH]])


def crop_in_worker(paths: list[Path], size: int, rng: np.random.Generator) -> None:
    for start in range(0, len(paths), BATCH):
        np.stack([decode_random_crop(p, size, SCALE, rng) for p in paths[start : start + BATCH]])


def worker_share(paths: list[Path], size: int, rng: np.random.Generator) -> None:
    for start in range(0, len(paths), BATCH):
        batch = paths[start : start + BATCH]
        pad_batch([decode_for_device_crop(p, size, SCALE, rng)[0] for p in batch])


def rates(decode: Decode, paths: list[Path], size: int) -> tuple[float, float]:
    """(images per CPU-second, images per wall-second) of one pass."""
    rng = np.random.default_rng(0)
    cpu, wall = time.process_time(), time.perf_counter()
    decode(paths, size, rng)
    return len(paths) / (time.process_time() - cpu), len(paths) / (time.perf_counter() - wall)


def gpu_share_on_cpu(paths: list[Path], size: int) -> float:
    """crop_resize's images per CPU-second here (what the GPU does in the chosen path)."""
    rng = np.random.default_rng(0)
    decoded = [decode_for_device_crop(p, size, SCALE, rng) for p in paths[:BATCH]]
    canvas, shapes = pad_batch([image for image, _ in decoded])
    boxes = torch.tensor([box for _, box in decoded])
    cpu = time.process_time()
    crop_resize(torch.from_numpy(canvas), boxes, torch.from_numpy(shapes), size)
    return len(decoded) / (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--images", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="128,160,192,224")
    parser.add_argument("--max-sides", default="256,352", help="training-ready stores to time")
    parser.add_argument("--quality", type=int, default=90)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        full = make_photos(args.data, Path(tmp), args.images)
        variants: dict[str, tuple[Decode, list[Path]]] = {
            PLAIN: (plain, full),
            "draft decode + crop in worker, 500x375": (crop_in_worker, full),
        }
        stored_bytes = {}
        for side in (int(s) for s in args.max_sides.split(",")):
            paths = store(full, Path(tmp), StoredImages(max_side=side, quality=args.quality))
            stored_bytes[side] = statistics.mean(p.stat().st_size for p in paths)
            name = f"store max side {side} q{args.quality}"
            variants[f"{name}, crop in worker"] = (crop_in_worker, paths)
            variants[f"{name}, worker's share, crop on GPU"] = (worker_share, paths)
        cpu: dict[tuple[str, int], list[float]] = {}
        wall: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.rounds):
            for size in sizes:
                for name, (decode, paths) in variants.items():
                    c, w = rates(decode, paths, size)
                    cpu.setdefault((name, size), []).append(c)
                    wall.setdefault((name, size), []).append(w)
        gpu_share = {size: gpu_share_on_cpu(full, size) for size in sizes}
        full_bytes = statistics.mean(p.stat().st_size for p in full)
    print(f"device: {hardware_line()}")
    print(
        f"{args.images} photos (500x375 q90, {full_bytes / 1e3:.1f} kB), "
        + ", ".join(f"store {s}: {b / 1e3:.1f} kB" for s, b in stored_bytes.items())
        + f"; {args.rounds} rounds, one process, one thread"
    )
    print("| decode | crop px | images/s per core (CPU time) | vs plain | images/s (wall) |")
    print("|---|--:|--:|--:|--:|")
    for size in sizes:
        base = statistics.median(cpu[(PLAIN, size)])
        for name in variants:
            med = statistics.median(cpu[(name, size)])
            print(
                f"| {name} | {size} | {med:,.0f} | {med / base:.2f}x "
                f"| {statistics.median(wall[(name, size)]):,.0f} |"
            )
    print(
        "crop_resize (the GPU's share) on this CPU, one thread: "
        + ", ".join(f"{s} px {r:,.0f} images/s" for s, r in gpu_share.items())
    )


if __name__ == "__main__":
    main()
