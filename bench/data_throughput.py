"""Images per second of the image loader on the real CIFAR-10 JPEGs: first decode vs cached.

    python bench/data_throughput.py [--data PATH] [--repeats 3] [--workers 0,1,2]

Reads ../shared/data/cifar10-jpeg.tar.gz beside the repository by default (60,000 32x32
JPEGs). Every measurement starts from an empty SPOTRUN_HOME in a temporary folder, so "first"
really decodes and "cached" really reads the uint8 cache. Prints medians over --repeats runs:

* archive read: one pass through the .tar.gz, every image's bytes into memory;
* decode: the 60,000 images decoded by N worker processes (no cache), side by side for each N;
* first load: load_data end to end on the archive (read, decode, statistics, cache write);
* cached load: load_data again, served from the cache;
* folder: the archive unpacked once, then the first and the cached load from the folder;
* epoch: one training epoch of batches through the augmentation (crop 4 px + flip) on the CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spotrun.recipes import Recipe, get_recipe  # noqa: E402
from spotrun.train.data.archive import read_image_archive, unpacked  # noqa: E402
from spotrun.train.data.imagefolder import DecodePlan, decode_all  # noqa: E402
from spotrun.train.data.images import usable_cpus  # noqa: E402
from spotrun.train.data.loading import load_data  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def median_time(fn: Callable[[], object], repeats: int) -> float:
    return statistics.median(timed(fn) for _ in range(repeats))


def fresh_home() -> None:
    os.environ["SPOTRUN_HOME"] = tempfile.mkdtemp(prefix="spotrun-bench-")


def quietly(fn: Callable[[], object]) -> Callable[[], object]:
    """fn with the loader's progress lines silenced (they would swamp the table)."""

    def run() -> object:
        with contextlib.redirect_stdout(io.StringIO()):
            return fn()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", default="0,1,2", help="decoding processes to compare")
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"no data at {args.data}: pass --data PATH to cifar10-jpeg.tar.gz")
    workers = [int(w) for w in args.workers.split(",")]
    r = args.repeats
    rows: list[tuple[str, float, int]] = []

    def recipe(data: Path, w: int) -> Recipe:
        overrides = [f"data={data}", "batch_size=512", f"data_workers={w}"]
        augment = ["augment.crop_padding=4", "augment.flip=true"]
        return get_recipe("digits-fast", [*overrides, *augment])

    def load(data: Path, w: int) -> Callable[[], object]:
        return quietly(lambda: load_data(recipe(data, w)))

    print(f"data: {args.data}; CPUs: {usable_cpus()}; repeats: {r}", flush=True)
    train, test = read_image_archive(args.data)
    total = len(train.refs) + len(test.refs)
    refs = [*train.refs, *test.refs]
    read_s = median_time(quietly(lambda: read_image_archive(args.data)), r)
    rows.append(("archive read (bytes into memory)", read_s, total))
    for w in workers:
        seconds = median_time(quietly(partial(decode_all, refs, DecodePlan(), w, "all")), r)
        rows.append((f"decode, {w} worker processes", seconds, total))
        print(f"decode with {w} workers: {total / seconds:,.0f} images/s", flush=True)

    best = max(workers)
    firsts, cached = [], []
    for _ in range(r):
        fresh_home()
        firsts.append(timed(load(args.data, best)))
        cached.append(timed(load(args.data, best)))
    rows.append((f"first load from the archive ({best} workers)", statistics.median(firsts), total))
    rows.append(("cached load", statistics.median(cached), total))

    fresh_home()
    cache_dir = Path(os.environ["SPOTRUN_HOME"]) / "cache"
    rows.append(
        (
            "unpack the archive to a folder (once)",
            timed(quietly(lambda: unpacked(args.data, cache_dir))),
            total,
        )
    )
    folder = next((cache_dir / "unpacked").iterdir())
    rows.append((f"first load from the folder ({best} workers)", timed(load(folder, best)), total))
    rows.append(
        (
            "cached load from the folder (list, stat, read)",
            median_time(load(folder, best), r),
            total,
        )
    )

    with contextlib.redirect_stdout(io.StringIO()):
        source, _ = load_data(recipe(args.data, best))
    epoch_s = median_time(lambda: [None for _ in source.batches(0)], r)
    rows.append(("training epoch: index, crop 4 px, flip, normalize", epoch_s, len(source) * 512))

    print(f"\n{'step':52} {'seconds':>9} {'images/s':>11}")
    for name, seconds, count in rows:
        print(f"{name:52} {seconds:9.2f} {count / seconds:11,.0f}")
    first = statistics.median(firsts)
    print(f"\ncached load is {first / statistics.median(cached):.0f}x faster than the first load")


if __name__ == "__main__":
    main()
