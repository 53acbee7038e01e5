"""Launching 16 detached runs at once against launching one, in the lab.

    PYTHONPATH=. python bench/launch_parallel.py [--runs 16] [--repeats 2]

One round: `spotrun launch digits-fast --cloud aws --detach` started N times at once (N
processes, as a shell loop would), timed from the first start until every run is `running`
(its instance made, provisioned over SSH, its job started in tmux). The same for a single
launch, side by side in one process, then the ratio of the medians. The lab's hosts run at
nice 19: on this machine the "instances" share the CPUs with spotrun itself, where real
instances would have their own.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spotlab import Lab  # noqa: E402
from spotlab.lab import EC2_WAITS  # noqa: E402

JOB = ["--set", "epochs=400"]  # long enough that every job is still running when measured


def busy_cpu_s() -> float:
    """CPU-seconds this whole machine has been busy (every process, other users' too)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def states(home: Path) -> dict[str, tuple[str, float | None]]:
    """run id -> (state, when it became running)."""
    with sqlite3.connect(home / "ledger.db") as db:
        rows = db.execute(
            "SELECT r.id, r.state, (SELECT MIN(at) FROM transitions t "
            " WHERE t.run_id = r.id AND t.to_state = 'running') FROM runs r"
        ).fetchall()
    return {run_id: (state, at) for run_id, state, at in rows}


def end_runs(home: Path, lab: Lab) -> None:
    """Kill the round's supervisors and terminate its instances (a bench need not stop nicely)."""
    with sqlite3.connect(home / "ledger.db") as db:
        pids = [p for (p,) in db.execute("SELECT supervisor_pid FROM runs") if p]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    live = [i["InstanceId"] for i in lab.instances(states=("pending", "running"))]
    if live:
        lab.ec2.terminate_instances(InstanceIds=live)
        lab.hosts.sync()


LIBRARY_LAUNCH = """
import sys
from spotrun.service import runs as api
from spotrun.core.config import load_settings
settings = load_settings()
ledger = api.open_ledger(settings, reconcile=False)
for _ in range(int(sys.argv[1])):
    prepared = api.prepare_launch(
        settings, "digits-fast", api.LaunchRequest(cloud="aws"), overrides=["epochs=400"]
    )
    api.launch(ledger, prepared)
"""


def one_round(
    count: int, home: Path, env: dict[str, str], lab: Lab, *, via: str = "cli"
) -> tuple[float, list[float], float]:
    """Seconds until all are running, each run's seconds, machine CPU-seconds meanwhile."""
    lab.config.write_config(home)
    cpu_before = busy_cpu_s()
    started = time.time()
    if via == "cli":  # N `spotrun launch -d` processes at once, as a shell loop with & makes
        argv = [sys.executable, "-m", "spotrun", "launch", "digits-fast", "--cloud", "aws", "-d"]
        commands = [[*argv, *JOB] for _ in range(count)]
    else:  # one Python process launching N runs through spotrun.service.runs, as a script would
        commands = [[sys.executable, "-c", LIBRARY_LAUNCH, str(count)]]
    procs = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
        )
        for command in commands
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"launch failed: {err}")
    deadline = time.monotonic() + 600
    while True:
        now = states(home)
        failed = [r for r, (state, _) in now.items() if state == "failed"]
        if failed:
            with sqlite3.connect(home / "ledger.db") as db:
                why = db.execute(
                    f"SELECT id, message FROM runs WHERE id IN ({','.join('?' * len(failed))})",
                    failed,
                ).fetchall()
            raise SystemExit(f"runs failed: {why}")
        reached = [at for _, at in now.values() if at is not None]
        if len(now) == count and len(reached) == count:
            break
        if time.monotonic() > deadline:
            raise SystemExit("runs did not all start in 10 minutes")
        time.sleep(0.05)
    cpu = busy_cpu_s() - cpu_before
    latencies = sorted(at - started for at in reached)
    end_runs(home, lab)
    return max(latencies), latencies, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--boot-s",
        type=float,
        default=0.0,
        help="seconds the lab's instances take to answer SSH (0: at once; EC2 takes 20-60)",
    )
    parser.add_argument(
        "--ec2-waits",
        action="store_true",
        help="EC2's own pending, boot and consistency times (spotlab.lab.EC2_WAITS)",
    )
    args = parser.parse_args()
    waits = dict(EC2_WAITS) if args.ec2_waits else {"boot_s": args.boot_s}
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
        f"the lab's EC2 waits: {waits}"
    )
    singles: list[float] = []
    manys: list[float] = []
    library: list[float] = []
    with tempfile.TemporaryDirectory(prefix="sr-bench-", dir="/tmp") as scratch:
        root = Path(scratch)
        with Lab(root / "lab", bucket=False, host_nice=19, **waits) as lab:  # type: ignore[arg-type]
            for i in range(args.repeats):
                rounds = (
                    (1, singles, "cli"),
                    (args.runs, manys, "cli"),
                    (args.runs, library, "api"),
                )
                for count, results, via in rounds:
                    home = root / f"home-{count}-{via}-{i}"
                    env = {
                        **os.environ,
                        **lab.config.env(),
                        "SPOTRUN_HOME": str(home),
                        "PYTHONPATH": str(REPO),
                    }
                    # Warm this home's caches as a user's earlier launches would have.
                    lab.config.write_config(home)
                    subprocess.run(
                        [
                            sys.executable,
                            "-m",
                            "spotrun",
                            "launch",
                            "digits-fast",
                            "--cloud",
                            "aws",
                            "--dry-run",
                        ],
                        env=env,
                        capture_output=True,
                        cwd=REPO,
                        check=True,
                    )
                    wall, latencies, cpu = one_round(count, home, env, lab, via=via)
                    results.append(wall)
                    spread = ", ".join(f"{x:.1f}" for x in latencies)
                    print(
                        f"round {i + 1}: {count:>2} launch(es) via {via}: all running after "
                        f"{wall:6.2f} s, machine busy {cpu / count:.2f} CPU-s per launch  "
                        f"(each: {spread})"
                    )
    single, many = statistics.median(singles), statistics.median(manys)
    from_one = statistics.median(library)
    print(
        f"\nmedian time until every run is running: 1 run {single:.2f} s; {args.runs} runs at "
        f"once from {args.runs} CLI processes {many:.2f} s, ratio {many / single:.2f} "
        f"(target <= 2); {args.runs} runs from one process (spotrun.service.runs) {from_one:.2f} s, "
        f"ratio {from_one / single:.2f}"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
