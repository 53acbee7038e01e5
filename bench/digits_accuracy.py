"""digits-fast over several seeds: final test accuracy and training seconds (median, range).

    python bench/digits_accuracy.py [--seeds 5]

Prints one line per seed and a summary; the recipe's stated result comes from this.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from spotrun.recipes import get_recipe
from spotrun.train.build import train_recipe


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    accs, train_s, wall_s = [], [], []
    for seed in range(args.seeds):
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            result = train_recipe(get_recipe("digits-fast", [f"seed={seed}"]), Path(tmp))
            wall_s.append(time.perf_counter() - started)
        accs.append(result.metrics["test_acc"])
        train_s.append(result.metrics["elapsed_s"])
        print(
            f"seed {seed}: test_acc {accs[-1]:.4f}  training {train_s[-1]:.2f} s  wall {wall_s[-1]:.2f} s"
        )
    print(
        f"digits-fast over {args.seeds} seeds: test_acc median {statistics.median(accs):.4f} "
        f"(min {min(accs):.4f}, max {max(accs):.4f}); training median {statistics.median(train_s):.2f} s; "
        f"wall median {statistics.median(wall_s):.2f} s"
    )


if __name__ == "__main__":
    main()
