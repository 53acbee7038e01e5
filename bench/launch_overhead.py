"""spotrun's own overhead from `spotrun launch` to the job's first training step, in the lab.

    PYTHONPATH=. python bench/launch_overhead.py [--repeats 5]

The lab's cloud boots at once (moto makes the instance, an sshd answers within milliseconds),
so what remains is spotrun: the CLI planning (offers, checks), the supervisor starting, the
EC2 requests (key pair, security group, RunInstances), the readiness wait, the SSH bootstrap
(code push, provision script), the job start in tmux; then the job's own start (python, torch,
data) up to its first step. The first step is when the trainer writes its step-1 checkpoint
(`--set checkpoint_every_steps=1`), seen on the host's own disk. The local cloud runs the same
way beside it, for comparison. Prints every phase per repeat and the medians.
"""

from __future__ import annotations

import argparse
import json
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

JOB = ["--set", "epochs=1", "--set", "checkpoint_every_steps=1"]
FIRST_CKPT = "checkpoints/ckpt-000000001.pt"
PHASES = [
    ("cli", "launch command: plan, checks, run recorded"),
    ("supervisor", "supervisor process up"),
    ("request", "EC2: key pair, security group, RunInstances"),
    ("ready", "running + SSH banner + host key pinned"),
    ("bootstrap", "code pushed, provisioned, job started in tmux"),
    ("spotrun", "= spotrun's overhead: launch -> job process started"),
    ("job_start", "the job's own start: python, torch, data -> first step"),
    ("total", "launch -> first training step"),
]


def wait_file(path_of: object, timeout_s: float = 120.0) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        path = path_of() if callable(path_of) else path_of
        if isinstance(path, Path) and path.exists():
            return path
        time.sleep(0.005)
    raise TimeoutError("the first checkpoint never appeared")


def ledger_times(home: Path, run_id: str) -> dict[str, float]:
    with sqlite3.connect(home / "ledger.db") as db:
        (created,) = db.execute("SELECT created_at FROM runs WHERE id = ?", (run_id,)).fetchone()
        moves = db.execute(
            "SELECT to_state, at FROM transitions WHERE run_id = ? ORDER BY id", (run_id,)
        ).fetchall()
    times = {"created": float(created)}
    for state, at in moves:
        times.setdefault(state, float(at))
    return times


def one_launch(cloud: str, home: Path, env: dict[str, str], lab: Lab | None) -> dict[str, float]:
    started = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "spotrun", "launch", "digits-fast", "--cloud", cloud, "-d", *JOB],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if proc.returncode != 0:
        raise SystemExit(f"launch failed: {proc.stderr}")
    run_id = proc.stdout.strip()
    if lab is None:
        run_dir = home / "runs" / run_id
    else:

        def run_dir_on_host() -> Path | None:
            found = lab.instances(run_id)
            if not found or found[0]["InstanceId"] not in lab.hosts:
                return None
            return lab.hosts.of(found[0]["InstanceId"]).path(f"/root/.spotrun/runs/{run_id}")

        run_dir = wait_file(lambda: run_dir_on_host())
    first_step = wait_file(run_dir / FIRST_CKPT).stat().st_mtime
    job_started = float(json.loads((run_dir / "job.json").read_text())["started_at"])
    t = ledger_times(home, run_id)
    stop = subprocess.run(
        [sys.executable, "-m", "spotrun", "stop", run_id], env=env, capture_output=True, text=True
    )
    if stop.returncode != 0:
        raise SystemExit(f"stop failed: {stop.stderr}")
    return {
        "cli": t["created"] - started,
        "supervisor": t["requested"] - t["created"],
        "request": t["provisioning"] - t["requested"],
        "ready": t["bootstrapping"] - t["provisioning"],
        "bootstrap": t["running"] - t["bootstrapping"],
        "spotrun": job_started - started,
        "job_start": first_step - job_started,
        "total": first_step - started,
    }


def report(name: str, rows: list[dict[str, float]]) -> dict[str, float]:
    print(f"\n{name}: {len(rows)} launches, one after another (seconds; the first is cold)")
    print(f"  {'phase':<11}" + "".join(f"{i + 1:>7}" for i in range(len(rows))) + "   median")
    medians = {}
    for key, what in PHASES:
        values = [row[key] for row in rows]
        medians[key] = statistics.median(values)
        cells = "".join(f"{v:7.2f}" for v in values)
        print(f"  {key:<11}{cells}  {medians[key]:7.2f}   {what}")
    return medians


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory(prefix="sr-bench-", dir="/tmp") as scratch:
        root = Path(scratch)
        # no boot time: what is measured is spotrun's own (EC2's boot is the lab's boot_s)
        with Lab(root / "lab", bucket=False, boot_s=0.0) as lab:
            aws_rows, local_rows = [], []
            for _ in range(args.repeats):
                for cloud, rows in (("aws", aws_rows), ("local", local_rows)):
                    home = root / cloud  # one user's home: the first launch finds no caches
                    lab.config.write_config(home)
                    env = {
                        **os.environ,
                        **lab.config.env(),
                        "SPOTRUN_HOME": str(home),
                        "TMUX_TMPDIR": str(root),
                        "PYTHONPATH": str(REPO),
                    }
                    rows.append(one_launch(cloud, home, env, lab if cloud == "aws" else None))
            subprocess.run(
                ["tmux", "-S", str(root / "tmux-0" / "default"), "kill-server"], capture_output=True
            )
        aws = report("aws (lab)", aws_rows)
        local = report("local cloud, same machine", local_rows)
    print(
        f"\nmedian spotrun overhead, launch -> job started: aws {aws['spotrun']:.2f} s "
        f"(target <= 3 s), local {local['spotrun']:.2f} s; launch -> first step: aws "
        f"{aws['total']:.2f} s, local {local['total']:.2f} s"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
