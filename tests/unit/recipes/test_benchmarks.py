"""The benchmark scripts run end to end in their quick modes on a tiny image folder (their
figures mean nothing there): the GPU benchmark's CPU dry run exercises every code path it takes
on a GPU, and the time-to-accuracy harness trains both recipes through `spotrun train`.
The ladder is checked to end exactly at the recipe it explains."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.unit.recipes.test_recipes import write_image_folder

BENCH = REPO / "bench"


@pytest.fixture(scope="module")
def tiny_cifar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tiny-cifar")
    return write_image_folder(root, 10, train_per_class=8, eval_count=20)


def _run(script: str, *args: str, home: Path) -> str:
    env = {**os.environ, "SPOTRUN_HOME": str(home), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_gpu_benchmark_dry_run_on_the_cpu(tiny_cifar: Path, tmp_path: Path) -> None:
    text = tmp_path / "verse.txt"
    text.write_text("Shall I compare thee to a summer's day?\nThou art more lovely.\n" * 40)
    out = _run(
        "gpu_benchmark.py", "--dry-run", "--data", str(tiny_cifar), "--text", str(text),
        "--target-loss", "20", home=tmp_path,
    )  # fmt: skip
    assert "CPU (dry run)" in out
    assert "warm-up (1 epoch, not counted)" in out
    assert "cifar10-fast over 1 runs: median" in out and "at or past 94%" in out
    for side in (32, 40, 48, 64):  # the four progressive sizes of a 64 px resnet50-fast
        assert f"| resnet50-fast train | {side} |" in out
    assert "| resnet50-fast eval | 72 |" in out and "| resnet50-baseline train | 64 |" in out
    assert "| resnet101-fast train | 32 |" in out and "| resnet101-fast eval | 72 |" in out
    assert "estimate from these rates" in out
    # The gpt2-small pair: tokens/s and memory, then the time to a (here trivial) loss.
    assert "| gpt2-small-baseline | " in out and "| gpt2-small-fast | " in out
    assert "gpt2-small-fast reaches 20.0" in out and "tokens/s: gpt2-small-fast" in out
    # FSDP: auto's choice at 124M and 1.5B, then off and on over 2 gloo processes.
    assert "at 1.5B (GPT-2 XL shape) on 2 GPU(s): fsdp auto: " in out  # on or off: RAM varies
    assert "| off | 2 | " in out and "| on | 2 | " in out


@pytest.mark.slow
def test_time_to_accuracy_harness_runs_both_recipes(tiny_cifar: Path, tmp_path: Path) -> None:
    out = _run(
        "cifar10_time_to_accuracy.py",
        "--quick",
        "--seeds",
        "1",
        "--target",
        "0.0",
        "--data",
        str(tiny_cifar),
        "--home",
        str(tmp_path / "home"),
        home=tmp_path,
    )
    assert "| cifar10-baseline | 0 |" in out and "| cifar10-fast | 0 |" in out
    assert "sooner than cifar10-baseline (medians of elapsed_s" in out
    assert "load average after" in out


def test_ladder_ends_at_the_benchmarked_fast_recipe(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import cifar10_ladder
    finally:
        sys.path.remove(str(BENCH))
    cifar10_ladder.check_last_rung_is_the_fast_recipe(tmp_path)  # exits if they differ
    rungs = cifar10_ladder.rung_overrides(tmp_path)
    assert rungs[0][1][-len(cifar10_ladder.BASELINE_CPU) :] == cifar10_ladder.BASELINE_CPU
    assert len(rungs) == len(cifar10_ladder.RUNGS) >= 8
    assert cifar10_ladder.parse_rungs("3-5,8") == [3, 4, 5, 8]
    assert cifar10_ladder.parse_rungs("all") == list(range(len(rungs)))
    with pytest.raises(SystemExit, match="rungs are 0-"):
        cifar10_ladder.parse_rungs(f"2-{len(rungs)}")
