"""Grid, random + ASHA, TPE + Hyperband and PBT on the same sweep problem with the same dollar
budget.

    PYTHONPATH=. python bench/sweep_search.py [--seeds 3] [--trials 10] [--epochs 6]
        [--population 4] [--methods grid,pbt]

The problem: digits-fast (on this machine's CPU, the local cloud) for --epochs epochs, over
lr 0.01..1 (log), weight decay 1e-5..1e-2 (log), label smoothing 0/0.1/0.2 and width
16/32/64 (the last two are dict keys of the recipe: listed values, not ranges). The grid is 2 x 2 x 2 x 1 points of that space (lr 0.05/0.5, weight decay 1e-4/3e-3, smoothing
0/0.15, width 32); random and TPE draw --trials trials, 2 at once, the seed of each sweep's
sampler and of every trial's training the bench's seed. PBT trains --population members in 3
generations of --epochs / 3 epochs (each generation of a member is one trial, one run).

Dollars: the local cloud is free, so each trial's instance-seconds (the cost report's, its
start-up included) are priced at PRICE_PER_HOUR, c6i.large's on-demand price in spotrun's
pricing table. The budget of a seed is what the grid spent; each method's trials count, in the
order they ended, while the running total stays within it (so a method that prunes buys more
trials with the same money). Printed per method and seed: trials inside the budget, pruned,
best test accuracy reached within the budget, and the dollars spent when the best first reached
TARGET (- if never), with the CPU line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._env import hardware_line, with_malloc_settings  # noqa: E402

PRICE_PER_HOUR = 0.085  # c6i.large on demand (spotrun/cloud/on_demand_prices.json)
TARGET = 0.985
SPACE = ["lr=0.01:1:log", "weight_decay=0.00001:0.01:log"]
# Keys the recipe holds in dicts take listed values (--grid): a searched sweep draws among them.
CHOICES = ["methods.label_smoothing.smoothing=0,0.1,0.2", "model_options.width=16,32,64"]
GRID = [
    "lr=0.05,0.5",
    "weight_decay=0.0001,0.003",
    "methods.label_smoothing.smoothing=0,0.15",
]
METHODS = {  # name: (prepare_sweep options, what it is)
    "grid": ({}, "every grid point to its end"),
    "random+asha": ({"search": "random", "early_stop": "asha"}, "random draws, ASHA"),
    "tpe+hyperband": ({"search": "tpe", "early_stop": "hyperband"}, "TPE, Hyperband"),
    "pbt": ({"search": "pbt"}, "population-based training, 3 generations"),
}


def run_sweep(method: str, seed: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The sweep's trials, each with its end time, cost, best accuracy and status."""
    from spotrun.core.config import load_settings
    from spotrun.service import runs as api
    from spotrun.service.sweeps import prepare_sweep, start_sweep, wait_for_end
    from spotrun.sweep import board

    options, _what = METHODS[method]
    searched = "search" in options
    population = method == "pbt"
    if population:
        options = {**options, "pbt_interval": max(1, args.epochs // 3)}
    settings = load_settings()
    ledger = api.open_ledger(settings)
    prepared = prepare_sweep(
        settings,
        "digits-fast",
        space=SPACE if searched else None,
        grid=CHOICES if searched else GRID,
        search_trials=(args.population if population else args.trials) if searched else None,
        overrides=[f"epochs={args.epochs}", "threads=1", f"seed={seed}"]
        + ([] if searched else ["model_options.width=32"]),
        max_parallel=2,
        grace_epochs=1,
        reduction_factor=3,
        seed=seed,
        request=api.LaunchRequest(name=f"{method.replace('+', '-')}-{seed}"),
        **options,
    )
    started = time.monotonic()
    sweep = start_sweep(ledger, prepared)
    sweep = wait_for_end(ledger, sweep.id, poll_s=2.0)
    print(
        f"  {method} seed {seed}: {sweep.state.value} in {time.monotonic() - started:.0f} s",
        flush=True,
    )
    trials = []
    for e in board.leaderboard(ledger, sweep):
        if e.run is None or e.run.ended_at is None:
            continue
        trials.append(
            {
                "ended": e.run.ended_at,
                "usd": (e.time_s or 0.0) * PRICE_PER_HOUR / 3600,
                "best": e.best,
                "pruned": e.status == "pruned",
            }
        )
    return sorted(trials, key=lambda t: t["ended"])


def within_budget(trials: list[dict[str, Any]], budget: float) -> dict[str, Any]:
    spent, best, to_target, count, pruned = 0.0, None, None, 0, 0
    for trial in trials:
        if spent + trial["usd"] > budget + 1e-12:
            break
        spent += trial["usd"]
        count += 1
        pruned += trial["pruned"]
        if trial["best"] is not None and (best is None or trial["best"] > best):
            best = trial["best"]
        if to_target is None and best is not None and best >= TARGET:
            to_target = spent
    return {"trials": count, "pruned": pruned, "best": best, "to_target": to_target, "usd": spent}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=10, help="random's and TPE's trials")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--population", type=int, default=4, help="PBT's members")
    parser.add_argument(
        "--methods", default=",".join(METHODS), help="which to run (grid always: the budget)"
    )
    args = parser.parse_args()
    chosen = ["grid", *(m for m in args.methods.split(",") if m in METHODS and m != "grid")]
    with_malloc_settings()
    home = Path(tempfile.mkdtemp(prefix="spotrun-search-bench-"))
    tmux = Path(tempfile.mkdtemp(prefix="sr-search-", dir="/tmp"))
    os.environ["SPOTRUN_HOME"] = str(home)
    os.environ["TMUX_TMPDIR"] = str(tmux)
    os.environ.pop("TMUX", None)
    print(hardware_line(), flush=True)
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in chosen}
    try:
        for seed in range(args.seeds):
            runs = {m: run_sweep(m, seed, args) for m in chosen}
            budget = sum(t["usd"] for t in runs["grid"])
            for method, trials in runs.items():
                row = {"seed": seed, "budget": budget, **within_budget(trials, budget)}
                rows[method].append(row)
                print(f"  seed {seed} {method}: {row}", flush=True)  # kept if the run is cut
    finally:
        os.system(f"tmux -S {tmux}/tmux-{os.getuid()}/default kill-server 2>/dev/null")
        shutil.rmtree(tmux, ignore_errors=True)
    print()
    print(
        f"digits-fast, {args.epochs} epochs, 2 trials at once; random/TPE {args.trials} trials; "
        f"PBT {args.population} members; "
        f"budget per seed = the grid's spend at ${PRICE_PER_HOUR}/h; target {TARGET}"
    )
    print(
        f"{'method':<14} {'seed':>4} {'budget $':>9} {'trials':>6} {'pruned':>6} "
        f"{'best acc':>8} {'$ to target':>11}"
    )
    for method, found in rows.items():
        for r in found:
            best = "-" if r["best"] is None else f"{r['best']:.4f}"
            reach = "-" if r["to_target"] is None else f"{r['to_target']:.5f}"
            print(
                f"{method:<14} {r['seed']:>4} {r['budget']:>9.5f} {r['trials']:>6} "
                f"{r['pruned']:>6} {best:>8} {reach:>11}"
            )
    print()
    for method, found in rows.items():
        bests = [r["best"] for r in found if r["best"] is not None]
        reached = [r["to_target"] for r in found if r["to_target"] is not None]
        median_best = f"{statistics.median(bests):.4f}" if bests else "-"
        median_reach = f"${statistics.median(reached):.5f}" if reached else "-"
        print(
            f"{method:<14} median best {median_best}; reached {TARGET} in "
            f"{len(reached)}/{len(found)} seeds, median {median_reach} to get there"
        )
    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
