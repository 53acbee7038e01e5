"""The ladder from cifar10-baseline to cifar10-fast, one change per rung, in the manner of
David Page's "How to train your ResNet": the time to the same test accuracy at each rung, on
the real CIFAR-10 images, on this machine's CPU, so every method in the fast recipe shows what
it buys (or costs) here.

    python bench/cifar10_ladder.py --data ../shared/data/cifar10-jpeg.tar.gz [--seeds 1]

Every rung is cifar10-baseline shrunk for the CPU as bench/cifar10_time_to_accuracy.py shrinks
it, plus the overrides of every rung above it; the last rung is checked to be exactly
cifar10-fast as that benchmark runs it. Runs go two at a time (one torch thread each) and stop
at the target (SIGTERM: the trainer checkpoints and exits, as on a spot notice), so a rung
costs only its time to the target. The time is the trainer's elapsed_s at the first
evaluation at or past --target (evaluations every epoch, counted in it).
"""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _env import GLIBC_TUNABLES, with_malloc_settings  # noqa: E402
from _runs import (  # noqa: E402
    DEFAULT_DATA,
    REPO,
    Job,
    Outcome,
    fmt_pct,
    fmt_s,
    load_average,
    median_or_none,
    run_jobs,
    warm_cache,
)
from cifar10_time_to_accuracy import BASELINE_CPU, FAST_CPU, TARGET, THREADS  # noqa: E402

sys.path.insert(0, str(REPO))
from spotrun.recipes import Recipe, get_recipe  # noqa: E402


@dataclass(frozen=True)
class Rung:
    """One change to the rung above: `sets` are plain overrides (values on the way); `fields`
    and `methods` take their values from cifar10-fast itself, so the ladder cannot drift from
    the recipe it explains."""

    change: str
    sets: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()


RUNGS: list[Rung] = [
    Rung("cifar10-baseline: ResNet-18 (1/8 width), step LR, fp32, 6 epochs", BASELINE_CPU),
    Rung(
        "+ mixed precision and channels_last (auto: as the device computes fast)",
        methods=("mixed_precision", "channels_last"),
    ),
    Rung(
        "one-cycle LR (peak 0.2) in place of the step schedule, nesterov; 4 epochs, not 6",
        sets=("methods.step_decay=null", "lr=0.2", "epochs=4"),
        fields=("nesterov", "momentum"),
        methods=("one_cycle",),
    ),
    Rung(
        "cifar-fastnet (1/4 width) in place of ResNet-18, 2 px reflect crop; 2 epochs",
        fields=(
            "model",
            "model_options",
            "batch_size",
            "lr",
            "epochs",
            "weight_decay",
            "augment.crop_padding",
            "augment.padding_mode",
        ),
    ),
    Rung("+ patch whitening of the first layer", methods=("patch_whitening",)),
    Rung("+ no weight decay on norms and biases", methods=("no_decay_norm_bias",)),
    Rung("+ label smoothing", methods=("label_smoothing",)),
    Rung("+ EMA of the weights", methods=("ema",)),
    Rung("+ test-time mirror images = cifar10-fast", methods=("tta",)),
]

COMMON = ("eval_every_epochs=1",)

# Methods not in cifar10-fast, each tried once on top of it (`--probes`): what each would buy
# or cost there. Rows: spotrun/train/methods/README.md.
PROBES: list[Rung] = [
    Rung("+ adaptive gradient clipping (agc, clipping 0.01)", sets=("methods.agc={}",)),
    Rung("SWA from 75% in place of EMA", sets=("methods.ema=null", "methods.swa={}")),
    Rung("+ ghost BatchNorm (32 images a slice)", sets=("methods.ghost_batchnorm={}",)),
    Rung("+ weight standardisation", sets=("methods.weight_standardization={}",)),
    Rung("+ squeeze-excite after each 64-channel conv", sets=("methods.squeeze_excite={}",)),
    Rung("+ RandAugment (2 operations, magnitude 0.3)", sets=("methods.randaugment={}",)),
    Rung("+ AugMix (3 chains of 1-3 operations)", sets=("methods.augmix={}",)),
    Rung(
        "+ factorize the 64-channel convs at rank 16",
        sets=('methods.factorize={"min_channels": 64}',),
    ),
]


def _value(recipe: dict[str, Any], dotted: str) -> Any:
    node: Any = recipe
    for part in dotted.split("."):
        node = node[part]
    return node


def _as_override(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return f"{key}={str(value).lower()}"
    if isinstance(value, (dict, list, tuple)):
        return f"{key}={json.dumps(value)}"
    return f"{key}={value}"


def fast_cpu_recipe(data: Path) -> Recipe:
    return get_recipe(
        "cifar10-fast", [f"data={data}", f"threads={THREADS}", *COMMON, *FAST_CPU], data_here=False
    )


def rung_overrides(data: Path) -> list[tuple[str, tuple[str, ...]]]:
    """Each rung's change and its full override list (every rung above it included)."""
    fast = fast_cpu_recipe(data).model_dump(mode="json")
    out: list[tuple[str, tuple[str, ...]]] = []
    acc: list[str] = [f"data={data}", f"threads={THREADS}", *COMMON]
    for rung in RUNGS:
        acc += rung.sets
        acc += [_as_override(f, _value(fast, f)) for f in rung.fields]
        acc += [_as_override(f"methods.{m}", fast["methods"][m]) for m in rung.methods]
        out.append((rung.change, tuple(acc)))
    return out


def check_last_rung_is_the_fast_recipe(data: Path) -> None:
    """The ladder must end at the recipe it explains, not at something like it."""
    last = get_recipe("cifar10-baseline", list(rung_overrides(data)[-1][1]), data_here=False)
    skip = {"name", "description", "result", "measured_with", "resources", "target"}
    a = {k: v for k, v in last.model_dump().items() if k not in skip}
    b = {k: v for k, v in fast_cpu_recipe(data).model_dump().items() if k not in skip}
    differ = sorted(k for k in a if a[k] != b[k])
    if differ:
        details = "; ".join(f"{k}: ladder {a[k]!r} vs recipe {b[k]!r}" for k in differ)
        sys.exit(f"the ladder's last rung is not cifar10-fast as benchmarked: {details}")


def parse_rungs(text: str) -> list[int]:
    """`3-8`, `0,2,5` or `all`: the rungs to run, in order, checked against RUNGS."""
    if text == "all":
        return list(range(len(RUNGS)))
    chosen: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        try:
            chosen += range(int(first), int(last or first) + 1)
        except ValueError:
            raise SystemExit(f"--rungs: expected e.g. 3-8 or 0,2,5, got '{text}'") from None
    if not chosen or min(chosen) < 0 or max(chosen) >= len(RUNGS):
        raise SystemExit(f"--rungs: rungs are 0-{len(RUNGS) - 1}, got '{text}'")
    return sorted(set(chosen))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the CIFAR-10 images")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--target", type=float, default=TARGET, help="test accuracy, 0..1")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time")
    parser.add_argument("--home", type=Path, default=None, help="SPOTRUN_HOME (decode cache)")
    parser.add_argument(
        "--probes",
        default=None,
        help="all, or PROBES indices (0,2): cifar10-fast and each of those methods on top of it, "
        "instead of the rungs",
    )
    parser.add_argument(
        "--rungs", default="all", help="which rungs to run: all, 3-8, 0,2,5 (ratios: vs the first)"
    )
    args = parser.parse_args()
    chosen = parse_rungs(args.rungs)
    if not args.data.exists():
        sys.exit(
            f"no data at {args.data}: pass --data PATH (the cifar10-jpeg.tar.gz of ../shared/data)"
        )
    data = args.data.resolve()
    check_last_rung_is_the_fast_recipe(data)
    with_malloc_settings()
    home = args.home or Path(tempfile.mkdtemp(prefix="spotrun-bench-home-"))
    if args.home is None:  # a decoded-image cache of our own: gone when the benchmark ends
        atexit.register(shutil.rmtree, home, True)
    rungs = rung_overrides(data)
    if args.probes:
        fast_change, fast_sets = rungs[-1]
        picked = range(len(PROBES)) if args.probes == "all" else map(int, args.probes.split(","))
        probes = [PROBES[i] for i in picked]
        rungs = [(fast_change, fast_sets)] + [(p.change, fast_sets + p.sets) for p in probes]
        chosen = list(range(len(rungs)))
    jobs = [
        Job(f"{i}", "cifar10-baseline", rungs[i][1], seed)
        for seed in range(args.seeds)
        for i in chosen
    ]
    print(f"load average before: {load_average()}  (2 cores shared with other work)")
    print(
        f"GLIBC_TUNABLES={GLIBC_TUNABLES}; {THREADS} torch thread per run; {args.parallel} runs at a time"
    )

    def progress(job: Job, row: dict[str, Any]) -> None:
        print(
            f"  [rung {job.label} s{job.seed}] epoch {row['epoch']}: test_acc {fmt_pct(float(row['test_acc']))}"
            f"  elapsed {float(row['elapsed_s']):.1f} s",
            flush=True,
        )

    warm_cache(home, jobs[0].recipe, jobs[0].overrides)
    outcomes = run_jobs(
        jobs,
        parallel=args.parallel,
        home=home,
        target=args.target,
        stop_at_target=True,
        on_row=progress,
    )
    print(
        f"\nTime to {fmt_pct(args.target)} test accuracy, CPU ({THREADS} thread per run), median of {args.seeds} seed(s):\n"
    )
    goal = fmt_pct(args.target)
    print(
        f"| rung | change | s to {goal} | CPU s to {goal} | epochs to {goal} | s per epoch | "
        f"best acc seen | vs rung {chosen[0]} (s) | vs rung {chosen[0]} (CPU s) |"
    )
    print("|--:|---|--:|--:|--:|--:|--:|--:|--:|")
    first: tuple[float | None, float | None] = (None, None)
    for i in chosen:
        what = rungs[i][0]
        mine: list[Outcome] = [o for o in outcomes if o.job.label == str(i)]
        seconds = median_or_none([o.time_to(args.target) for o in mine])
        cpu = median_or_none([o.cpu_to(args.target) for o in mine])
        epochs = median_or_none([o.epochs_to(args.target) for o in mine])
        per_epoch = median_or_none(
            [
                float(o.rows[-1]["elapsed_s"]) / int(o.rows[-1]["epoch"]) if o.rows else None
                for o in mine
            ]
        )
        best = max(o.best_acc for o in mine)
        if i == chosen[0]:
            first = (seconds, cpu)
        ratios = [
            f"{base / mine_:.2f}x" if base is not None and mine_ is not None else "-"
            for base, mine_ in zip(first, (seconds, cpu))
        ]
        print(
            f"| {i} | {what} | {fmt_s(seconds)} | {fmt_s(cpu)} | "
            f"{int(epochs) if epochs is not None else '-'} | {fmt_s(per_epoch)} | {fmt_pct(best)} | "
            f"{ratios[0]} | {ratios[1]} |"
        )
    print(f"\nload average after: {load_average()}")
    print(
        "commands: spotrun train cifar10-baseline --run-dir DIR --set seed=S "
        + " ".join(f"--set '{s}'" for s in rungs[-1][1])
    )
    if not all(o.ok for o in outcomes):
        sys.exit(1)


if __name__ == "__main__":
    main()
