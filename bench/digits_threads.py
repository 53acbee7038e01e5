"""What a new user sees from the README's `spotrun launch digits-fast` on this machine: the
local cloud's thread choice (one per free core) against the recipe's fixed threads=2, with no
extra load and with one busy background process.

    python bench/digits_threads.py [--repeats 3] [--only auto]

Each repeat runs every (load, variant) pair once, alternating, each launch in a fresh
SPOTRUN_HOME and tmux server; prints each launch and then the medians side by side: seconds of
training (the trainer's elapsed_s), the launch's wall time, the accuracy, and the threads used.
"No extra load" means no process of this bench's; the machine's load average is printed with
every line, since on a shared machine other work runs too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _env import hardware_line, with_malloc_settings  # noqa: E402

VARIANTS = {
    "auto (README command)": [],
    "threads=2 (recipe's fixed)": ["--set", "threads=2"],
}
LOADS = ("no extra load", "1 busy process")


def launch(extra: list[str]) -> dict[str, float | str]:
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory(dir="/tmp") as tmux:
        env = {**os.environ, "SPOTRUN_HOME": home, "TMUX_TMPDIR": tmux}
        env.pop("TMUX", None)
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "spotrun", "launch", "digits-fast", *extra],
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            sys.exit(f"launch failed:\n{proc.stdout}\n{proc.stderr}")
        (run,) = json.loads(
            subprocess.run(
                [sys.executable, "-m", "spotrun", "ls", "--all", "--json"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        log = open(os.path.join(home, "runs", run["id"], "job.log")).read()
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
    threads = log.split(" CPU threads")[0].rsplit("; ", 1)[-1] if " CPU threads" in log else "?"
    metrics = run["metrics"]
    return {
        "train_s": float(metrics["elapsed_s"]),
        "wall_s": wall,
        "acc": float(metrics["test_acc"]),
        "threads": threads,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--only", choices=["auto", "fixed"], help="one variant (fixed threads=2 is slow when busy)"
    )
    args = parser.parse_args()
    variants = {
        name: extra
        for name, extra in VARIANTS.items()
        if args.only is None or name.startswith("auto" if args.only == "auto" else "threads=2")
    }
    with_malloc_settings()
    print(hardware_line())
    results: dict[tuple[str, str], list[dict[str, float | str]]] = {}
    for repeat in range(args.repeats):
        for load in LOADS:
            busy = None
            if load != LOADS[0]:
                busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            try:
                for name, extra in variants.items():
                    got = launch(extra)
                    results.setdefault((load, name), []).append(got)
                    print(
                        f"repeat {repeat}  {load:<15} {name:<27} train {got['train_s']:6.1f} s  "
                        f"wall {got['wall_s']:6.1f} s  acc {100 * float(got['acc']):.1f}%  "
                        f"threads {got['threads']}  (load avg {os.getloadavg()[0]:.1f})",
                        flush=True,
                    )
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
    print(f"\nmedians over {args.repeats} repeats; {hardware_line()}")
    print(f"{'':<17}{'variant':<29}{'train s':>8}{'wall s':>8}{'acc %':>7}  threads")
    for (load, name), runs in results.items():
        train = statistics.median(float(r["train_s"]) for r in runs)
        wall = statistics.median(float(r["wall_s"]) for r in runs)
        acc = statistics.median(100 * float(r["acc"]) for r in runs)
        threads = ",".join(sorted({str(r["threads"]) for r in runs}))
        print(f"{load:<17}{name:<29}{train:8.1f}{wall:8.1f}{acc:7.1f}  {threads}")
    for load in LOADS if len(variants) == 2 else ():
        auto = statistics.median(
            float(r["train_s"]) for r in results[(load, "auto (README command)")]
        )
        fixed = statistics.median(
            float(r["train_s"]) for r in results[(load, "threads=2 (recipe's fixed)")]
        )
        print(f"{load}: fixed threads=2 / auto = {fixed / auto:.2f}x training time")


if __name__ == "__main__":
    main()
