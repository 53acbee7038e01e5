"""How fast the CLI answers: `spotrun --help` and `spotrun ls` beside `python -c pass`.

    PYTHONPATH=. python bench/cli_startup.py [--repeats 15] [--baseline DIR]

    PYTHONPATH=. python bench/cli_startup.py --floors   # and what `ls` cannot go below

    PYTHONPATH=. python bench/cli_startup.py --commands  # and the commands the tests call most

--commands adds `status RUN`, `sweep status SWEEP` (a finished sweep of two digits-fast
trials, launched first), and a `launch -d` of your own command on the local cloud followed by
a `stop` of it, each repeat (each tree its own runs, named apart).

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
import json
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


def _make_sweep(env: dict[str, str]) -> str:
    """A finished sweep of two digits-fast trials (one epoch each); its id."""
    subprocess.run(
        [*_spotrun(), "sweep", "digits-fast", "--grid", "lr=0.1,0.2", "--set", "epochs=1"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=REPO,
        timeout=600,
    )
    listed = subprocess.run(
        [*_spotrun(), "sweep", "ls", "--json"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    return str(json.loads(listed.stdout)[0]["id"])


def _launch_and_stop(
    env: dict[str, str],
    launched: dict[str, Path],
    stopped: dict[str, Path],
    prefix: str,
    walls: dict[str, list[float]],
    cpus: dict[str, list[float]],
) -> None:
    """Each tree launches a run of its own (`-d`, live until stopped), then stops it."""
    for index, ((launch, tree), stop) in enumerate(zip(launched.items(), stopped, strict=True)):
        tree_env = {**env, "PYTHONPATH": str(tree)}
        run = f"{prefix}-{index}"
        launch_argv = [*_spotrun(), "launch", "--cmd", "sleep 600", "--name", run, "-d"]
        for name, argv in ((launch, launch_argv), (stop, [*_spotrun(), "stop", run])):
            wall, cpu = _timed(argv, tree_env)
            walls.setdefault(name, []).append(wall)
            cpus.setdefault(name, []).append(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--baseline", type=Path, help="another source tree to time beside this one")
    parser.add_argument(
        "--floors", action="store_true", help="also time importing sqlite3 and spotrun's ledger"
    )
    parser.add_argument(
        "--commands", action="store_true", help="also time status, sweep status, launch, stop"
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
        sweep = _make_sweep(env) if args.commands else ""
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
            if args.commands:
                commands[f"spotrun status RUN{label}"] = (
                    [*_spotrun(), "status", "bench-0"],
                    tree_env,
                )
                commands[f"spotrun sweep status{label}"] = (
                    [*_spotrun(), "sweep", "status", sweep],
                    tree_env,
                )
        launched = {f"spotrun launch -d{label}": tree for label, tree in trees.items()}
        stopped = {f"spotrun stop RUN{label}": tree for label, tree in trees.items()}
        for argv, run_env in commands.values():  # warm the file cache and .pyc files
            _timed(argv, run_env)
        if args.commands:
            _launch_and_stop(env, launched, stopped, "warm-up", {}, {})
        names = [
            *commands,
            *(launched if args.commands else {}),
            *(stopped if args.commands else {}),
        ]
        walls: dict[str, list[float]] = {name: [] for name in names}
        cpus: dict[str, list[float]] = {name: [] for name in names}
        for repeat in range(args.repeats):
            for name, (argv, run_env) in commands.items():
                wall, cpu = _timed(argv, run_env)
                walls[name].append(wall)
                cpus[name].append(cpu)
            if args.commands:
                _launch_and_stop(env, launched, stopped, f"live-{repeat}", walls, cpus)
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
    for name in names:
        wall = statistics.median(walls[name])
        cpu = statistics.median(cpus[name])
        print(
            f"  {name:<30} wall {wall:6.3f} s  cpu {cpu:6.3f} s  "
            f"({wall / base_wall:4.1f}x python -c pass)"
        )


if __name__ == "__main__":
    main()
