"""The whole life of a trivial job of your own in the lab: `spotrun launch --cmd "echo hello"`.

    PYTHONPATH=. python bench/job_lifecycle.py [--repeats 5]

Each repeat runs `spotrun launch --cmd "echo hello" --cloud aws` in the foreground (it returns
when the run has ended: instance terminated, as EC2 confirms before the run is marked ended),
then checks EC2's own answer (the instance terminated) and the output synced back. The time is
split by phase from the ledger (state transitions and the "results synced" event):

    launch     the CLI: plan, checks, run recorded, handed to the supervisor
    request    EC2: key pair, security group, RunInstances
    ssh_ready  instance running, SSH banner, host key pinned
    provision  code pushed (first time), provision script, workdir/setup, job started in tmux
    run        the job itself, until its exit is seen
    sync       the last pull of the run folder (job.log, exit.json)
    terminate  terminate, EC2 confirms, cost recorded, run marked succeeded
    return     the CLI notices the end and exits
Target: total under 6 s (median of 5) on this machine.
"""

from __future__ import annotations

import argparse
import os
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

PHASES = ["launch", "request", "ssh_ready", "provision", "run", "sync", "terminate", "return"]
TARGET_S = 6.0


def ledger_times(home: Path, run_id: str) -> dict[str, float]:
    with sqlite3.connect(home / "ledger.db") as db:
        moves = db.execute(
            "SELECT to_state, at FROM transitions WHERE run_id = ? ORDER BY id", (run_id,)
        ).fetchall()
        synced = db.execute(
            "SELECT at FROM events WHERE run_id = ? AND kind = 'sync' AND message = ?",
            (run_id, "results synced"),
        ).fetchone()
    times: dict[str, float] = {}
    for state, at in moves:
        times.setdefault(state, float(at))
    times["synced"] = float(synced[0])
    return times


def one_life(home: Path, env: dict[str, str], lab: Lab) -> dict[str, float]:
    started = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "spotrun", "launch", "--cmd", "echo hello", "--cloud", "aws"],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    returned = time.time()
    if proc.returncode != 0:
        raise SystemExit(f"launch failed ({proc.returncode}): {proc.stdout}\n{proc.stderr}")
    run_id = proc.stdout.split()[1]  # "run <id>  <name>  on aws"
    (item,) = lab.instances(run_id)
    if item["State"]["Name"] != "terminated":
        raise SystemExit(f"instance {item['InstanceId']} is {item['State']['Name']}")
    if "hello" not in (home / "runs" / run_id / "job.log").read_text():
        raise SystemExit("the job's output did not come back")
    t = ledger_times(home, run_id)
    return {
        "launch": t["requested"] - started,
        "request": t["provisioning"] - t["requested"],
        "ssh_ready": t["bootstrapping"] - t["provisioning"],
        "provision": t["running"] - t["bootstrapping"],
        "run": t["syncing"] - t["running"],
        "sync": t["synced"] - t["syncing"],
        "terminate": t["succeeded"] - t["synced"],
        "return": returned - t["succeeded"],
        "total": returned - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    rows = []
    with tempfile.TemporaryDirectory(prefix="sr-bench-", dir="/tmp") as scratch:
        root = Path(scratch)
        with Lab(root / "lab", bucket=False) as lab:
            home = root / "home"  # one user's home: the first life finds no caches
            lab.config.write_config(home)
            env = {
                **os.environ,
                **lab.config.env(),
                "SPOTRUN_HOME": str(home),
                "TMUX_TMPDIR": str(root),
                "PYTHONPATH": str(REPO),
            }
            for _ in range(args.repeats):
                rows.append(one_life(home, env, lab))
            subprocess.run(
                ["tmux", "-S", str(root / "tmux-0" / "default"), "kill-server"], capture_output=True
            )
    print(f"\n`launch --cmd 'echo hello' --cloud aws`, {len(rows)} lives one after another (s)")
    print(f"  {'phase':<10}" + "".join(f"{i + 1:>7}" for i in range(len(rows))) + "   median")
    for key in [*PHASES, "total"]:
        values = [row[key] for row in rows]
        cells = "".join(f"{v:7.2f}" for v in values)
        print(f"  {key:<10}{cells}  {statistics.median(values):7.2f}")
    total = statistics.median(row["total"] for row in rows)
    verdict = "met" if total < TARGET_S else "NOT met"
    print(f"\nmedian whole life {total:.2f} s; target < {TARGET_S:.0f} s: {verdict}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
