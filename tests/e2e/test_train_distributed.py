"""`spotrun train` under torchrun: 2 CPU processes with gloo, DDP, stop signals, exact resume.

Real torchrun, real processes, real signals. A reference job runs beside the one that is
stopped twice (a SIGUSR1 to one worker only, then a SIGTERM to torchrun itself) and resumed;
the metrics must match the reference bitwise. The global batch is the recipe's contract: 2
processes x B and 1 process x B x 2 accumulated train the same weights, and a run checkpointed
on 2 processes goes on on 1 as if it had never moved.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

ARGS = [
    "--set", "epochs=4",
    "--set", "threads=1",
    "--set", "checkpoint_every_steps=4",
]  # fmt: skip


def torchrun(
    run_dir: Path, recipe: str = "digits-fast", args: list[str] = ARGS, processes: int = 2
) -> subprocess.Popen[str]:
    """`spotrun train` on `processes` gloo processes under torchrun; 1: a plain process."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m"]
    return subprocess.Popen(
        [
            sys.executable,
            *(launcher if processes == 2 else ["-m"]),
            "spotrun",
            "train",
            recipe,
            "--run-dir",
            str(run_dir),
            *args,
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


def tiny_gpt_args(tmp_path: Path) -> list[str]:
    """A character GPT small enough for seconds of CPU, on a text written here. LayerNorm, no
    BatchNorm and no dropout: nothing in it depends on how a batch is cut, so 2 x 4 and
    1 x 4 x 2 accumulated must agree to float tolerance (BatchNorm would see the same
    micro-batches but keep other running statistics: DDP trains on rank 0's)."""
    words = random.Random(0)
    text = " ".join(
        "".join(words.choice("etaoinshrdlu") for _ in range(words.randint(2, 7)))
        for _ in range(6000)
    )
    (tmp_path / "text.txt").write_text(text)
    return [
        "--set", f"data={tmp_path / 'text.txt'}",
        "--set", 'model_options={"block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 32}',
        "--set", "text.block_size=16",
        "--set", "text.steps_per_epoch=8",
        "--set", "text.eval_tokens=2048",
        "--set", "batch_size=8",  # the global batch: 2 processes x 4, or 1 x 4 x 2 accumulated
        "--set", "device_batch=4",
        "--set", "eval_batch_size=8",
        "--set", "epochs=4",
        "--set", "threads=1",
        "--set", "checkpoint_every_steps=2",
    ]  # fmt: skip


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    newest = checkpoints(run_dir)[-1]
    payload = torch.load(run_dir / "checkpoints" / newest, weights_only=True)
    return dict(payload["model"])


def assert_same_metrics(got: list[dict], expected: list[dict]) -> None:
    """Steps, epochs and accuracies equal; losses to float tolerance (the ranks' sums are
    added in another order on one process)."""
    assert [(r["step"], r["epoch"]) for r in got] == [(r["step"], r["epoch"]) for r in expected]
    for mine, theirs in zip(got, expected, strict=True):
        assert mine == pytest.approx(theirs, rel=1e-6, abs=1e-9)


def test_global_batch_on_two_processes_or_one_accumulating_and_moving(tmp_path: Path) -> None:
    args = tiny_gpt_args(tmp_path)
    on_two, moved, on_one = tmp_path / "two", tmp_path / "moved", tmp_path / "one"
    reference = torchrun(on_two, "shakespeare-baseline", args)
    first = torchrun(moved, "shakespeare-baseline", args)

    # 1. Checkpointed on 2 processes (SIGTERM to torchrun once training is under way).
    out, step = stop_and_check(first, moved, "", lambda: first.send_signal(signal.SIGTERM))
    ref_out, _ = reference.communicate(timeout=300)
    assert reference.returncode == 0, ref_out
    assert "on 2 processes (8 windows of 16 tokens per step = 2 processes x 4" in ref_out
    expected = metrics(on_two)
    assert [r["step"] for r in expected] == [8, 16, 24, 32]
    assert step < 32, "stopped before the end"

    # 2. The same run from scratch on 1 process: each share of 8 in 2 micro-batches of 4.
    alone = torchrun(on_one, "shakespeare-baseline", args, processes=1)
    out, _ = alone.communicate(timeout=300)
    assert alone.returncode == 0, out
    assert "(8 windows of 16 tokens per step = 1 process x 4 x 2 accumulated" in out
    assert_same_metrics(metrics(on_one), expected)
    weights = final_weights(on_two)
    for name, value in final_weights(on_one).items():
        torch.testing.assert_close(value, weights[name], rtol=1e-5, atol=1e-6)

    # 3. The run checkpointed on 2 processes goes on on 1: the same later metrics and weights.
    resumed = torchrun(moved, "shakespeare-baseline", args, processes=1)
    out, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out
    assert "resuming on 1 process(es) a run checkpointed on 2" in out
    assert_same_metrics(metrics(moved), expected)
    for name, value in final_weights(moved).items():
        torch.testing.assert_close(value, weights[name], rtol=1e-5, atol=1e-6)
