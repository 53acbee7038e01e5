"""Two-node runs in the lab: launch -> first step, and a node's notice -> training resumed.

    PYTHONPATH=. python bench/multinode.py [--repeats 3]

Each repeat launches digits-fast with `--nodes 2 --cloud aws` in the lab (two sshd hosts on
loopback addresses as two instances, torchrun's c10d rendezvous and gloo between them), with a
checkpoint every step so that steps can be seen on the hosts' own disks:

- launch -> first step: from the `spotrun launch` command to the step-1 checkpoint on node 0;
- when epoch 2 is done on node 0, the lab serves a spot notice on node 1 (EC2 reclaims it 8 s
  later); notice -> resumed: from the notice to the first checkpoint after the resume on the
  repaired cluster's node 0. The ledger's times split it: notice seen by the controller,
  replacement requested, running on two nodes again.

The lab boots instances at once (EC2 takes 20-60 s), so these are spotrun's and torchrun's own
times on this machine. Prints every repeat and the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spotlab import Lab  # noqa: E402

T = TypeVar("T")
JOB = ["epochs=8", "threads=1", "model_options.width=64", "checkpoint_every_steps=1"]
SETTINGS = {
    "cluster_env": {"GLOO_SOCKET_IFNAME": "lo"},  # the lab's nodes live on loopback
    "notice_poll_s": 0.5,
    "end_grace_s": 600.0,
}
RESUMED = re.compile(r"resumed at epoch \d+ step (\d+)")
PHASES = [
    ("launch_to_step1", "launch -> first step on 2 nodes"),
    ("notice_seen", "notice -> controller has it (replacement asked)"),
    ("to_running", "notice -> torchrun started on the repaired cluster"),
    ("to_resumed", "notice -> first step after the resume"),
]


def wait(probe: Callable[[], T | None], what: str, timeout_s: float = 300.0) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value is not None:
            return value
        time.sleep(0.01)
    raise TimeoutError(f"timed out waiting for {what}")


def host_dir(lab: Lab, instance_id: str, run_id: str) -> Path | None:
    if instance_id not in lab.hosts:
        return None
    return lab.hosts.of(instance_id).path(f"/root/.spotrun/runs/{run_id}")


def layout(home: Path, run_id: str) -> list[str] | None:
    try:
        data = json.loads((home / "runs" / run_id / "cluster.json").read_text())
        return [str(n["id"]) for n in data["nodes"]]
    except (OSError, ValueError, KeyError):
        return None


def epoch_on(path: Path) -> int:
    try:
        lines = (path / "metrics.jsonl").read_text().splitlines()
        return int(json.loads(lines[-1])["epoch"]) if lines else 0
    except (OSError, ValueError, KeyError):
        return 0


def resumed_step(lab: Lab, run_id: str) -> tuple[Path, int] | None:
    """The host where the trainer resumed (node 0 of the repaired cluster) and its step."""
    for item in lab.instances(run_id, states=("running",)):
        folder = host_dir(lab, item["InstanceId"], run_id)
        if folder is None:
            continue
        try:
            found = RESUMED.findall((folder / "job.log").read_text())
        except OSError:
            continue
        if found:
            return folder, int(found[-1])
    return None


def ledger_times(home: Path, run_id: str, after: float) -> dict[str, float]:
    with sqlite3.connect(home / "ledger.db") as db:
        moves = db.execute(
            "SELECT to_state, at FROM transitions WHERE run_id = ? AND at >= ? ORDER BY id",
            (run_id, after),
        ).fetchall()
    times: dict[str, float] = {}
    for state, at in moves:
        times.setdefault(state, float(at))
    return times


def one_run(lab: Lab, home: Path, env: dict[str, str]) -> dict[str, float]:
    started = time.time()
    sets = [arg for item in JOB for arg in ("--set", item)]
    proc = subprocess.run(
        [sys.executable, "-m", "spotrun", "launch", "digits-fast", "--nodes", "2"]
        + ["--cloud", "aws", "-d", *sets],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if proc.returncode != 0:
        raise SystemExit(f"launch failed: {proc.stderr}")
    run_id = proc.stdout.strip()
    node0, node1 = wait(lambda: layout(home, run_id), "the cluster to start")
    head = wait(lambda: host_dir(lab, node0, run_id), "node 0's run folder")
    first = wait(
        lambda: next(iter((head / "checkpoints").glob("ckpt-000000001.pt")), None),
        "the first step",
    )
    launch_to_step1 = first.stat().st_mtime - started
    wait(lambda: True if epoch_on(head) >= 2 else None, "epoch 2 on node 0")
    noticed = time.time()
    lab.interruptions.interrupt(node1, notice_s=8.0)
    folder, step = wait(lambda: resumed_step(lab, run_id), "the trainer to resume")
    after = folder / "checkpoints" / f"ckpt-{step + 1:09d}.pt"
    resumed_at = wait(lambda: after if after.exists() else None, "a step after the resume")
    to_resumed = resumed_at.stat().st_mtime - noticed
    moves = ledger_times(home, run_id, noticed)
    done = subprocess.run(
        [sys.executable, "-m", "spotrun", "stop", run_id], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"stop failed: {done.stderr}")
    return {
        "launch_to_step1": launch_to_step1,
        "notice_seen": moves["interrupted"] - noticed,
        "to_running": moves["running"] - noticed,
        "to_resumed": to_resumed,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    rows = []
    with tempfile.TemporaryDirectory(prefix="sr-bench-", dir="/tmp") as scratch:
        root = Path(scratch)
        with Lab(root / "lab", bucket=False) as lab:
            for n in range(args.repeats):
                home = root / f"home{n}"
                lab.config.write_config(home, **SETTINGS)
                env = {
                    **os.environ,
                    **lab.config.env(),
                    "SPOTRUN_HOME": str(home),
                    "TMUX_TMPDIR": str(root),
                    "PYTHONPATH": str(REPO),
                }
                rows.append(one_run(lab, home, env))
    print(f"\ntwo-node digits-fast in the lab, {len(rows)} runs (seconds)")
    print(f"  {'phase':<16}" + "".join(f"{i + 1:>8}" for i in range(len(rows))) + "   median")
    for key, what in PHASES:
        values = [row[key] for row in rows]
        cells = "".join(f"{v:8.2f}" for v in values)
        print(f"  {key:<16}{cells}  {statistics.median(values):7.2f}   {what}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
