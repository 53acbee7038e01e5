"""shakespeare-fast against shakespeare-baseline: time to the baseline's final validation loss
on tiny Shakespeare (character level), on this machine's CPU, 3 seeds each, side by side.

    python bench/shakespeare_time_to_loss.py --data ../shared/data/tinyshakespeare.txt

Both recipes run exactly as shipped (they are sized for one CPU thread), interleaved: one
baseline beside one fast run of the same seed, one torch thread each, so both see the same
background load. The target is the median final validation loss (test_loss, nats per
character) of the baseline runs; each run's time to it is the trainer's elapsed_s (training
plus the evaluations before it) at its first evaluation at or below it. --ladder adds one run
per change (LADDER: the modded-nanoGPT model options, then rotary, QK norm, no dropout and
Muon): the baseline with that change alone (seed 0), to show what each buys; with --seeds 0
the ladder runs alone beside baseline seed 0. --ladder-on shakespeare-fast puts the rungs on
fast instead (with --target, as there is no baseline then); --rungs picks some by label. --epochs N runs every run N epochs (the ladder
was measured at 4, to fit a shared machine: say so beside its figures). --muon runs shakespeare-fast with
optimizer=muon beside each fast seed (the same recipe, only the optimizer changed).
--target LOSS skips the baseline runs and times every run to LOSS instead (a shorter check).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _env import GLIBC_TUNABLES, hardware_line, with_malloc_settings  # noqa: E402
from _runs import REPO, Job, Outcome, fmt_s, load_average, median_or_none, run_jobs  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"
BASELINE, FAST = "shakespeare-baseline", "shakespeare-fast"
FAST_MUON = "shakespeare-fast+muon"
MUON = "optimizer=muon"  # muon_lr and muon_momentum as the recipe's defaults
# Each rung: the baseline with one change. The modded-nanoGPT model options first, then the
# methods that measured best on the earlier, weaker baseline, for comparison.
LADDER: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("+relu2 MLP", ("model_options.mlp=relu2",)),
    ("+softcap 30", ("model_options.logit_softcap=30",)),
    ("+softcap 15", ("model_options.logit_softcap=15",)),
    ("+zero-init proj", ("model_options.zero_init_proj=true",)),
    ("+untied head", ("model_options.tie_weights=false",)),
    ("+untied head lr x0.3", ("model_options.tie_weights=false", "model_options.head_lr_scale=0.3")),
    ("+qk_norm", ("methods.qk_norm={}",)),
    ("+rotary", ("methods.rotary={}",)),
    ("dropout 0", ("model_options.dropout=0",)),
    ("+muon", (MUON,)),
)  # fmt: skip
QUICK = ("epochs=1", "text.steps_per_epoch=4", "text.eval_tokens=1024")


def losses(o: Outcome) -> list[tuple[float, float]]:
    return [(float(r["elapsed_s"]), float(r["test_loss"])) for r in o.rows]


def time_to(o: Outcome, target: float) -> float | None:
    return next((t for t, loss in losses(o) if loss <= target), None)


def final_loss(o: Outcome) -> float:
    return losses(o)[-1][1] if o.rows else float("nan")


def jobs(
    data: Path,
    seeds: int,
    quick: bool,
    ladder: bool,
    muon: bool = False,
    baseline: bool = True,
    epochs: int | None = None,
    on: str = BASELINE,
    only: tuple[str, ...] = (),
) -> list[Job]:
    shorter = () if epochs is None else (f"epochs={epochs}",)
    common = (f"data={data}", "threads=1", *(QUICK if quick else ()), *shorter)
    out = []
    for seed in range(seeds):  # interleaved: baseline s, fast s, baseline s+1, ...
        if baseline:
            out.append(Job(BASELINE, BASELINE, common, seed))
        out.append(Job(FAST, FAST, common, seed))
        if muon:
            out.append(Job(FAST_MUON, FAST, (*common, MUON), seed))
    if ladder and seeds == 0:  # the ladder alone: its rungs against the recipe's seed 0
        out.append(Job(on, on, common, 0))
    if ladder:
        for label, sets in LADDER:
            if not only or label in only:
                out.append(Job(rung_label(label, on), on, (*common, *sets), 0))
    return out


def rung_label(label: str, on: str) -> str:
    return label if on == BASELINE else f"fast {label}"


def report(outcomes: list[Outcome], fixed_target: float | None = None) -> None:
    base = [o for o in outcomes if o.job.label == BASELINE]
    if fixed_target is None:
        target = statistics.median(final_loss(o) for o in base)
        print(f"\ntarget: the baseline's median final validation loss, {target:.4f} nats/char")
    else:
        target = fixed_target
        print(f"\ntarget: {target:.4f} nats/char, as given (--target)")
    print("\n| run | seed | s to target (elapsed_s) | final val loss | final s | wall s |")
    print("|---|--:|--:|--:|--:|--:|")
    for o in outcomes:
        end = losses(o)[-1][0] if o.rows else float("nan")
        print(f"| {o.job.label} | {o.job.seed} | {fmt_s(time_to(o, target))} | "
              f"{final_loss(o):.4f} | {end:.1f} | {o.wall_s:.0f} |")  # fmt: skip
    print(f"on: {hardware_line()}")
    ladder(outcomes, target, BASELINE)
    ladder(outcomes, target, FAST)
    medians: dict[str, Any] = {}
    for label in (BASELINE, FAST, FAST_MUON):
        mine = [o for o in outcomes if o.job.label == label]
        if not mine:
            continue
        medians[label] = median_or_none([time_to(o, target) for o in mine])
        finals = [final_loss(o) for o in mine]
        print(f"{label}: median {fmt_s(medians[label])} to target; final loss median "
              f"{statistics.median(finals):.4f} ({min(finals):.4f}-{max(finals):.4f})")  # fmt: skip
    f, m = medians.get(FAST), medians.get(FAST_MUON)
    if FAST_MUON in medians:
        words = f"{f / m:.2f}x sooner than" if f and m else "no ratio (a run missed) against"
        print(f"\n{FAST_MUON} (Muon) reaches the target {words} {FAST} (AdamW), medians")
    if not base:
        return
    per_seed(outcomes)
    b = medians[BASELINE]
    if b is not None and f is not None:
        print(f"\n{FAST} reaches the target {b / f:.2f}x sooner than {BASELINE} (medians) "
              f"on {hardware_line()}")  # fmt: skip
    else:
        print("\nno ratio: a run missed the target (a median over misses would flatter)")


def per_seed(outcomes: list[Outcome]) -> None:
    """Each seed on its own: fast's time to that seed's baseline final loss, against the
    baseline's own time to it (its last evaluation), so no seed's luck sets another's target."""
    print("\n| seed | baseline final loss | baseline s | fast s to that loss | ratio |")
    print("|--:|--:|--:|--:|--:|")
    for base in (o for o in outcomes if o.job.label == BASELINE and o.rows):
        fast = next(
            (o for o in outcomes if o.job.label == FAST and o.job.seed == base.job.seed), None
        )
        end_s, end_loss = losses(base)[-1]
        reached = time_to(fast, end_loss) if fast is not None else None
        ratio = f"{end_s / reached:.2f}x" if reached else "missed"
        print(f"| {base.job.seed} | {end_loss:.4f} | {end_s:.1f} | {fmt_s(reached)} | {ratio} |")
    print(f"on: {hardware_line()}")


def ladder(outcomes: list[Outcome], target: float, on: str) -> None:
    """Each rung on recipe `on` against its seed 0: its time to the target, its final loss."""
    labels = {rung_label(label, on) for label, _ in LADDER}
    rungs = [o for o in outcomes if o.job.label in labels]
    base = next((o for o in outcomes if o.job.label == on and o.job.seed == 0), None)
    if not rungs or base is None:
        return
    base_s = time_to(base, target)
    print(f"\n| rung (seed 0) | s to {target:.4f} | final val loss | vs {on} |")
    print("|---|--:|--:|--:|")
    for o in [base, *rungs]:
        reached = time_to(o, target)
        ratio = f"{base_s / reached:.2f}x" if base_s and reached else "-"
        print(f"| {o.job.label} | {fmt_s(reached)} | {final_loss(o):.4f} | {ratio} |")
    print(f"on: {hardware_line()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="tinyshakespeare.txt")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time")
    parser.add_argument("--ladder", action="store_true", help="also the baseline + each method")
    parser.add_argument("--quick", action="store_true", help="a few steps: a smoke run")
    parser.add_argument("--muon", action="store_true", help="also shakespeare-fast with Muon")
    parser.add_argument(
        "--epochs", type=int, help="every run this many epochs of 50 steps (a shorter ladder)"
    )
    parser.add_argument(
        "--ladder-on", choices=(BASELINE, FAST), default=BASELINE, help="the recipe it changes"
    )
    parser.add_argument("--rungs", help="comma-separated rung labels (LADDER); default all")
    parser.add_argument(
        "--target", type=float, help="time to this validation loss; no baseline runs"
    )
    args = parser.parse_args()
    if not args.data.is_file():
        sys.exit(f"no text at {args.data}: pass --data PATH (tinyshakespeare.txt)")
    with_malloc_settings()
    home = Path(tempfile.mkdtemp(prefix="spotrun-bench-home-"))
    todo = jobs(
        args.data.resolve(),
        args.seeds,
        args.quick,
        args.ladder,
        args.muon,
        args.target is None,
        args.epochs,
        args.ladder_on,
        tuple(r.strip() for r in args.rungs.split(",")) if args.rungs else (),
    )
    print(f"on: {hardware_line()}")
    print(f"load average before: {load_average()}; GLIBC_TUNABLES={GLIBC_TUNABLES}; "
          f"1 torch thread per run, {args.parallel} at a time, fp32")  # fmt: skip
    for job in todo[:2]:
        sets = " ".join(f"--set '{s}'" for s in (f"seed={job.seed}", *job.overrides))
        print(f"{job.label}: spotrun train {job.recipe} --run-dir DIR {sets}")

    def progress(job: Job, row: dict[str, Any]) -> None:
        print(f"  [{job.label} s{job.seed}] epoch {row['epoch']}: val loss "
              f"{float(row['test_loss']):.4f}  elapsed {float(row['elapsed_s']):.1f} s", flush=True)  # fmt: skip

    try:
        outcomes = run_jobs(todo, parallel=args.parallel, home=home, on_row=progress)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    report(outcomes, args.target)
    print(f"on: {hardware_line()}\nload average after: {load_average()}")
    if not all(o.exit_code == 0 for o in outcomes):
        sys.exit(1)


if __name__ == "__main__":
    main()
