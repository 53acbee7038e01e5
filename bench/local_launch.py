"""Wall time of `spotrun launch digits-fast` on the local cloud, start to finish.

    python bench/local_launch.py [--repeats 3]

Each repeat uses a fresh SPOTRUN_HOME and tmux server; prints each time and the median.
The walking skeleton's target: under 60 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    times = []
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory(dir="/tmp") as tmux:
            env = {**os.environ, "SPOTRUN_HOME": home, "TMUX_TMPDIR": tmux}
            env.pop("TMUX", None)
            started = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "spotrun", "launch", "digits-fast"],
                env=env,
                capture_output=True,
                text=True,
            )
            took = time.perf_counter() - started
            subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
        if proc.returncode != 0:
            sys.exit(f"launch failed:\n{proc.stdout}\n{proc.stderr}")
        times.append(took)
        print(f"repeat {i}: {took:.1f} s  ({proc.stdout.strip().splitlines()[-1]})")
    print(f"spotrun launch digits-fast: median {statistics.median(times):.1f} s over {len(times)}")


if __name__ == "__main__":
    main()
