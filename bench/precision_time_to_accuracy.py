"""cifar10-fast at 1/4 width on this CPU: time to 80% test accuracy with mixed_precision=auto
against fp32 and bf16 forced, on the real CIFAR-10 images, side by side in one run.

    python bench/precision_time_to_accuracy.py --data ../shared/data/cifar10-jpeg.tar.gz

Each variant is cifar10-fast as shipped (every method, batch 128, its schedules) at 1/4 width
for 4 epochs, an evaluation each epoch, one torch thread, trained by the real `spotrun train`
and changed only in precision and memory format. Two run at a time (one per core), in the
order auto + fp32 NCHW, then fp32 + channels_last + bf16 forced, so each pair shares the machine's
load; the CPU-seconds to the target are printed beside the wall time because they move far
less with the load. What auto chose, and why, is read from each run's device.json.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _env import GLIBC_TUNABLES, hardware_line, with_malloc_settings  # noqa: E402
from _runs import (  # noqa: E402
    DEFAULT_DATA,
    Job,
    Outcome,
    fmt_pct,
    fmt_s,
    load_average,
    run_jobs,
    warm_cache,
)

from spotrun.train.device import detect_capabilities  # noqa: E402

QUARTER = ('model_options={"widths": [16, 64, 64]}', "epochs=4")
QUICK = ('model_options={"widths": [4, 8, 8]}', "epochs=1", "methods.patch_whitening.num_images=40")
VARIANTS: dict[str, tuple[str, ...]] = {
    "auto (as shipped)": (),
    # channels_last left out: on x86 auto turns it on for fp32 too, so this is the NCHW side
    "fp32 forced, NCHW": (
        'methods.mixed_precision={"precision": "fp32"}',
        "methods.channels_last=null",
    ),
    "fp32 + channels_last": (
        'methods.mixed_precision={"precision": "fp32"}',
        'methods.channels_last={"when": "always"}',
    ),
    "bf16 forced + channels_last": (
        'methods.mixed_precision={"precision": "bf16"}',
        'methods.channels_last={"when": "always"}',
    ),
}
TARGET = 0.80


def chosen(outcome: Outcome) -> str:
    """What the run trained in, from its device.json."""
    if outcome.device is None:
        return "?"
    uses = {c["method"]: c["use"] for c in outcome.device["choices"]}
    return f"{uses.get('mixed_precision', '?')}, channels_last {uses.get('channels_last', '?')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the CIFAR-10 images")
    parser.add_argument("--target", type=float, default=TARGET, help="test accuracy, 0..1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="tiny nets, one epoch: a smoke run")
    parser.add_argument(
        "--skip-emulated-bf16",
        action="store_true",
        help="leave out bf16 forced where the CPU has no bf16 instructions (hours there: read "
        "its step time from bench/precision_auto.py instead)",
    )
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(
            f"no data at {args.data}: pass --data PATH (cifar10-jpeg.tar.gz of ../shared/data)"
        )
    with_malloc_settings()
    home = Path(tempfile.mkdtemp(prefix="spotrun-bench-home-"))
    atexit.register(shutil.rmtree, home, True)
    common = (f"data={args.data.resolve()}", "threads=1", "eval_every_epochs=1")
    size = QUICK if args.quick else QUARTER
    emulated = not detect_capabilities("cpu").cpu_bf16
    todo = [
        Job(label, "cifar10-fast", (*common, *size, *sets), args.seed)
        for label, sets in VARIANTS.items()
        if not (args.skip_emulated_bf16 and emulated and label.startswith("bf16"))
    ]
    print(f"device: {hardware_line()}")
    print(f"load average before: {load_average()}; GLIBC_TUNABLES={GLIBC_TUNABLES}; 1 thread a run")

    def progress(job: Job, row: dict[str, Any]) -> None:
        print(
            f"  [{job.label}] epoch {row['epoch']}: test_acc {fmt_pct(float(row['test_acc']))}"
            f"  elapsed {float(row['elapsed_s']):.1f} s",
            flush=True,
        )

    warm_cache(home, todo[0].recipe, todo[0].overrides)
    outcomes = run_jobs(todo, parallel=2, home=home, target=args.target, on_row=progress)
    goal = fmt_pct(args.target)
    print(f"\ncifar10-fast, 1/4 width, 4 epochs, seed {args.seed}; device: {hardware_line()}")
    auto = outcomes[0].device
    print(f"auto: {auto['line'] if auto else 'no device.json'}")
    print(
        f"| variant | trained in | s to {goal} | CPU s to {goal} | epochs to {goal} | final acc |"
    )
    print("|---|---|--:|--:|--:|--:|")
    for o in outcomes:
        epochs = o.epochs_to(args.target)
        print(
            f"| {o.job.label} | {chosen(o)} | {fmt_s(o.time_to(args.target))} | "
            f"{fmt_s(o.cpu_to(args.target))} | {epochs if epochs is not None else '-'} | "
            f"{fmt_pct(o.final_acc)} |"
        )
    print(f"load average after: {load_average()}")
    if not all(o.ok for o in outcomes):
        sys.exit(1)


if __name__ == "__main__":
    main()
