"""How fast a command answers through a controller on another host (`controller up --on ssh://`).

    PYTHONPATH=. python bench/remote_controller.py [--repeats 15]

In the lab: an always-on lab host (spotlab/always_on.py, a real sshd in its own mount space)
becomes the controller of a fresh SPOTRUN_HOME, which then launches a few finished runs there
(own commands on the host's local cloud). The commands then run alternately, so that a change
of load on a shared machine touches every side alike: `spotrun ls` and `spotrun status RUN`
through the remote controller, the same two on a home of this machine with as many runs, and
one bare ssh round trip over the shared connection (the floor). Prints medians (goal: a
forwarded command under 1 s) beside the CPU they were measured on.
"""

from __future__ import annotations

import argparse
import os
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
from spotlab.always_on import start_always_on_host, user_key  # noqa: E402
from spotlab.lab import Lab  # noqa: E402
from spotrun.remote_controller.connection import close_shared_connection, ssh_argv  # noqa: E402
from spotrun.remote_controller.record import load_record  # noqa: E402

RUNS = 3


def _cli(env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "spotrun", *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"spotrun {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, cwd=REPO, timeout=120)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="sr-bench-", dir="/tmp"))
    lab = Lab(root / "lab").start()
    host = None
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base["PYTHONPATH"] = str(REPO)
    laptop = {**base, "SPOTRUN_HOME": str(root / "laptop")}
    here = {**base, "SPOTRUN_HOME": str(root / "here"), "TMUX_TMPDIR": str(root)}
    record = None
    try:
        key = root / "key"
        host = start_always_on_host(lab, user_key(key), root / "host")
        lab.config.write_config(root / "laptop")
        url = f"ssh://root@{host.address}:{host.spec.port}"
        _cli(laptop, "controller", "up", "--on", url, "--key", str(key), "--python", sys.executable)
        run = ""
        for i in range(RUNS):
            for env in (laptop, here):
                _cli(env, "launch", "--cmd", "true", "--cloud", "local", "--name", f"r{i}")
            run = f"r{i}"
        record = load_record(root / "laptop")
        assert record is not None
        spotrun = [sys.executable, "-m", "spotrun"]
        sides = {
            "ls through the remote controller": (spotrun + ["ls"], laptop),
            "status RUN through the remote controller": (spotrun + ["status", run], laptop),
            "ls on this machine (same runs)": (spotrun + ["ls"], here),
            "status RUN on this machine": (spotrun + ["status", run], here),
            "ssh round trip (shared connection)": (
                ssh_argv(root / "laptop", record, "true"),
                laptop,
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in sides}
        for argv, env in sides.values():  # warm: the shared connection, the host's caches
            _timed(argv, env)
        for _ in range(options.repeats):
            for name, (argv, env) in sides.items():
                times[name].append(_timed(argv, env))
        print(hardware_line())
        with open("/proc/loadavg") as fh:
            print(f"load average: {' '.join(fh.read().split()[:3])}")
        print(f"medians of {options.repeats} alternating repeats, {RUNS} runs in each home:")
        for name, values in times.items():
            print(f"  {name:<42} {statistics.median(values):6.3f} s")
    finally:
        if record is not None:
            close_shared_connection(root / "laptop", record)
        if host is not None:
            host.stop()
        subprocess.run(["tmux", "kill-server"], env=here, capture_output=True, check=False)
        lab.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
