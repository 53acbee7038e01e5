"""`spotrun train` under torchrun: 2 CPU processes with gloo, DDP, stop signals, exact resume.

Real torchrun, real processes, real signals. A reference job runs beside the one that is
stopped twice (a SIGUSR1 to one worker only, then a SIGTERM to torchrun itself) and resumed;
the metrics must match the reference bitwise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

ARGS = [
    "--set", "epochs=4",
    "--set", "threads=1",
    "--set", "checkpoint_every_steps=4",
]  # fmt: skip


def torchrun(run_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "spotrun",
            "train",
            "digits-fast",
            "--run-dir",
            str(run_dir),
            *ARGS,
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=REPO,
    )


def worker_pids(launcher: int) -> dict[int, int]:
    """rank -> pid of torchrun's workers, read from /proc."""
    found: dict[int, int] = {}
    for task in Path(f"/proc/{launcher}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            for item in environ:
                if item.startswith(b"RANK="):
                    found[int(item[5:])] = int(pid)
    return found


def metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in rows]


def checkpoints(run_dir: Path) -> list[str]:
    folder = run_dir / "checkpoints"
    return sorted(p.name for p in folder.glob("ckpt-*.pt")) if folder.exists() else []


def stop_and_check(
    proc: subprocess.Popen[str], run_dir: Path, after: str, send: Callable[[], None]
) -> tuple[str, int]:
    """Once `run_dir` has a checkpoint newer than `after` (training is under way), `send` a
    stop signal; returns the job's output and the step it checkpointed at."""
    wait_for(
        lambda: checkpoints(run_dir)[-1:] > [after], timeout=120, what=f"a checkpoint after {after}"
    )
    send()
    out, _ = proc.communicate(timeout=120)  # a bound, not a figure: load changes the time
    # torchrun reports a worker that exited 75 as a failure; the workers' own lines say more.
    assert proc.returncode != 0, out
    assert out.count("checkpointed at step") == 1, out  # rank 0 speaks for the job
    step = int(out.split("checkpointed at step ")[1].split(";")[0])
    assert checkpoints(run_dir)[-1] == f"ckpt-{step:09d}.pt"
    return out, step


def test_torchrun_two_processes_stop_twice_and_resume_exactly(tmp_path: Path) -> None:
    reference_dir, run_dir = tmp_path / "reference", tmp_path / "run"
    reference = torchrun(reference_dir)
    first = torchrun(run_dir)

    # 1. A spot notice reaching one worker only: both ranks stop after the same step.
    def usr1_to_rank_1() -> None:
        os.kill(wait_for(lambda: worker_pids(first.pid).get(1), what="rank 1"), signal.SIGUSR1)

    out, step = stop_and_check(first, run_dir, "", usr1_to_rank_1)
    assert "stop requested by SIGUSR1" in out

    ref_out, _ = reference.communicate(timeout=300)
    assert reference.returncode == 0, ref_out
    assert "on 2 processes" in ref_out
    expected = metrics(reference_dir)
    assert len(expected) == 4 and expected[-1]["test_acc"] > 0.9
    assert step < expected[-1]["step"], "stopped before the end"

    # 2. Resumed, then torchrun itself gets SIGTERM (what `spotrun stop` sends the job).
    second = torchrun(run_dir)
    out, _ = stop_and_check(
        second, run_dir, f"ckpt-{step:09d}.pt", lambda: second.send_signal(signal.SIGTERM)
    )
    assert "resumed at epoch" in out and "stop requested by SIGTERM" in out

    # 3. Resumed to the end: every evaluation equals the reference's, once each.
    third = torchrun(run_dir)
    out, _ = third.communicate(timeout=300)
    assert third.returncode == 0, out
    assert metrics(run_dir) == expected
