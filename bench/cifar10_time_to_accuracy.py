"""cifar10-fast against cifar10-baseline: time to the same test accuracy on the real CIFAR-10
images, on this machine's CPU, median of 3 seeds each, side by side in one run.

    python bench/cifar10_time_to_accuracy.py --data ../shared/data/cifar10-jpeg.tar.gz

Both recipes run as shipped except for the overrides below, which shrink them to fit a CPU
(narrower nets, fewer epochs, an evaluation every epoch so the time to the target is measured
to within one epoch); the rest (schedules, methods, augmentation, batch sizes) is the recipe.
Runs go two at a time, one baseline beside one fast run of the same seed (one torch thread
each, so they share the two cores evenly and each sees the same background load), and every
run trains to its end: the accuracies reached are reported with the times.

The time to target is the trainer's elapsed_s at the first evaluation at or past --target:
training time plus the evaluations before it (the data are decoded once, before the clocks
start, into a cache both share). Both sides run with the same GLIBC_TUNABLES (bench/_env.py)
and thread count; the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _env import GLIBC_TUNABLES, with_malloc_settings  # noqa: E402
from _runs import (  # noqa: E402
    DEFAULT_DATA,
    Job,
    Outcome,
    fmt_pct,
    fmt_s,
    load_average,
    median_or_none,
    run_jobs,
    warm_cache,
)

THREADS = 1  # per run; two runs side by side fill the two cores

# The recipes shrunk for a 2-core CPU, in width and epochs only: what their stated results were
# measured with. Everything else is the recipe as shipped.
BASELINE_CPU = (
    'model_options={"stem": "cifar", "width": 8}',  # ResNet-18 at 1/8 width: 8-16-32-64
    "epochs=6",  # the step schedule's x0.1 drops land at epochs 3 and 4.5
)
FAST_CPU = (
    'model_options={"widths": [16, 64, 64]}',  # cifar-fastnet at 1/4 width
    "epochs=2",
)
TARGET = 0.72  # below both recipes' final accuracies at these sizes

# --quick: a smoke run of the whole harness (tiny nets, one epoch) for tests and a first look.
QUICK = ('model_options={"stem": "cifar", "width": 2}', "epochs=1", "batch_size=20")
QUICK_FAST = (
    'model_options={"widths": [4, 8, 8]}',
    "epochs=1",
    "batch_size=20",
    "methods.patch_whitening.num_images=40",
)


def jobs(data: Path, seeds: int, quick: bool) -> list[Job]:
    common = (f"data={data}", f"threads={THREADS}", "eval_every_epochs=1")
    base = (*common, *(QUICK if quick else BASELINE_CPU))
    fast = (*common, *(QUICK_FAST if quick else FAST_CPU))
    out = []
    for seed in range(seeds):  # interleaved: baseline s, fast s, baseline s+1, ...
        out.append(Job("cifar10-baseline", "cifar10-baseline", base, seed))
        out.append(Job("cifar10-fast", "cifar10-fast", fast, seed))
    return out


def command_line(job: Job) -> str:
    sets = " ".join(f"--set '{item}'" for item in (f"seed={job.seed}", *job.overrides))
    return f"spotrun train {job.recipe} --run-dir DIR {sets}"


def report(outcomes: list[Outcome], target: float) -> dict[str, Any]:
    goal = fmt_pct(target)
    print(
        f"\n| recipe | seed | s to {goal} (elapsed_s) | CPU s to {goal} | epochs to {goal} | final acc | best acc | wall s |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for o in outcomes:
        epochs = o.epochs_to(target)
        ran = o.rows[-1]["epoch"] if o.rows else "?"
        print(
            f"| {o.job.label} | {o.job.seed} | {fmt_s(o.time_to(target))} | {fmt_s(o.cpu_to(target))} | "
            f"{epochs if epochs is not None else '-'} of {ran} | "
            f"{fmt_pct(o.final_acc)} | {fmt_pct(o.best_acc)} | {o.wall_s:.0f} |"
        )
    summary: dict[str, Any] = {}
    print(
        f"\n| recipe | median s to {goal} | median CPU s to {goal} | median final acc | final acc range |"
    )
    print("|---|--:|--:|--:|--:|")
    for label in ("cifar10-baseline", "cifar10-fast"):
        mine = [o for o in outcomes if o.job.label == label]
        times = median_or_none([o.time_to(target) for o in mine])
        cpu = median_or_none([o.cpu_to(target) for o in mine])
        finals = [o.final_acc for o in mine]
        summary[label] = (times, cpu)
        print(
            f"| {label} | {fmt_s(times)} | {fmt_s(cpu)} | {fmt_pct(statistics.median(finals))} | "
            f"{fmt_pct(min(finals))} - {fmt_pct(max(finals))} |"
        )
    (base, base_cpu), (fast, fast_cpu) = summary["cifar10-baseline"], summary["cifar10-fast"]
    if base is not None and fast is not None:
        cpu_ratio = f"; {base_cpu / fast_cpu:.2f}x in CPU seconds" if base_cpu and fast_cpu else ""
        print(
            f"\ncifar10-fast reaches {goal} {base / fast:.2f}x sooner than cifar10-baseline (medians of elapsed_s{cpu_ratio})"
        )
    else:
        print(f"\nno ratio: a run missed {goal} (a median over misses would flatter)")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the CIFAR-10 images")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--target", type=float, default=TARGET, help="test accuracy, 0..1")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time")
    parser.add_argument("--home", type=Path, default=None, help="SPOTRUN_HOME (decode cache)")
    parser.add_argument("--quick", action="store_true", help="tiny nets, one epoch: a smoke run")
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(
            f"no data at {args.data}: pass --data PATH (the cifar10-jpeg.tar.gz of ../shared/data)"
        )
    with_malloc_settings()
    home = args.home or Path(tempfile.mkdtemp(prefix="spotrun-bench-home-"))
    if args.home is None:  # a decoded-image cache of our own: gone when the benchmark ends
        atexit.register(shutil.rmtree, home, True)
    todo = jobs(args.data.resolve(), args.seeds, args.quick)
    print(f"load average before: {load_average()}  (2 cores shared with other work)")
    print(
        f"GLIBC_TUNABLES={GLIBC_TUNABLES}; {THREADS} torch thread per run; {args.parallel} runs at a time"
    )
    for job in todo[:2]:
        print(f"{job.label}: {command_line(job)}")

    def progress(job: Job, row: dict[str, Any]) -> None:
        print(
            f"  [{job.label} s{job.seed}] epoch {row['epoch']}: test_acc {fmt_pct(float(row['test_acc']))}"
            f"  elapsed {float(row['elapsed_s']):.1f} s",
            flush=True,
        )

    warm_cache(home, todo[0].recipe, todo[0].overrides)
    outcomes = run_jobs(
        todo, parallel=args.parallel, home=home, target=args.target, on_row=progress
    )
    report(outcomes, args.target)
    print(f"load average after: {load_average()}")
    if not all(o.ok for o in outcomes):
        sys.exit(1)


if __name__ == "__main__":
    main()
