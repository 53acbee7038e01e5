"""How fast the CLI answers: `spotrun --help` and `spotrun ls` beside `python -c pass`.

    PYTHONPATH=. python bench/cli_startup.py [--repeats 15] [--baseline DIR]

    PYTHONPATH=. python bench/cli_startup.py --floors   # and what `ls` cannot go below

`ls` reads a fresh SPOTRUN_HOME holding a few finished runs (own commands on the local cloud,
launched first by this script). The commands run alternately, so that a change of load on a
shared machine touches every side alike; it prints each one's median wall time and CPU time
(user + system of the child), and the ratio to `python -c pass`. Every side runs as
`python -m spotrun` with PYTHONPATH naming its source tree: this checkout, and with
--baseline another one (e.g. `git archive main | tar -x -C DIR`) to compare before and after.
--floors adds the floors under `ls`: Python importing sqlite3, and importing spotrun's ledger
(the store and its records, which `ls` reads runs through).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._env import hardware_line  # noqa: E402

RUNS = 3  # finished runs in the home that `ls` lists


def _spotrun() -> list[str]:
    return [sys.executable, "-m", "spotrun"]


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, cwd=env["PYTHONPATH"])
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _make_runs(env: dict[str, str]) -> None:
    for i in range(RUNS):
        subprocess.run(
            [*_spotrun(), "launch", "--cmd", f"echo run {i}", "--name", f"bench-{i}"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=REPO,
            timeout=300,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--baseline", type=Path, help="another source tree to time beside this one")
    parser.add_argument(
        "--floors", action="store_true", help="also time importing sqlite3 and spotrun's ledger"
    )
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="spotrun-startup-"))
    env = {**os.environ, "SPOTRUN_HOME": str(home), "PYTHONPATH": str(REPO)}
    # An installed spotrun has its bytecode compiled (pip does it): let the warm-up runs write
    # __pycache__ here too, or every run would compile spotrun's sources again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    trees = {"": REPO} if args.baseline is None else {"": REPO, " [base]": args.baseline.resolve()}
    try:
        _make_runs(env)
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], env)
        }
        if args.floors:
            commands["import sqlite3"] = ([sys.executable, "-c", "import sqlite3"], env)
            ledger = "import spotrun.store.ledger"
            commands["import the ledger"] = ([sys.executable, "-c", ledger], env)
        for label, tree in trees.items():
            tree_env = {**env, "PYTHONPATH": str(tree)}
            commands[f"spotrun --help{label}"] = ([*_spotrun(), "--help"], tree_env)
            commands[f"spotrun ls{label}"] = ([*_spotrun(), "ls"], tree_env)
        for argv, run_env in commands.values():  # warm the file cache and .pyc files
            _timed(argv, run_env)
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, (argv, run_env) in commands.items():
                wall, cpu = _timed(argv, run_env)
                walls[name].append(wall)
                cpus[name].append(cpu)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    base_wall = statistics.median(walls["python -c pass"])
    print(f"hardware: {hardware_line()}")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(
        f"medians of {args.repeats} alternating runs ({RUNS} runs in the ledger for ls; "
        "bytecode cached):"
    )
    if args.baseline is not None:
        print(f"  [base] = {args.baseline}")
    for name in commands:
        wall = statistics.median(walls[name])
        cpu = statistics.median(cpus[name])
        print(
            f"  {name:<23} wall {wall:6.3f} s  cpu {cpu:6.3f} s  "
            f"({wall / base_wall:4.1f}x python -c pass)"
        )


if __name__ == "__main__":
    main()
