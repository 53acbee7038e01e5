"""A CIFAR-10 recipe launched on the local cloud, as a user types it: the recipe listed and
shown, then `spotrun launch cifar10-fast` on the CPU with a data path relative to where the
command runs (the job itself runs in its run folder, so launch must pin the path). The data
is a tiny ImageFolder the test writes; the real images are what bench/ measures with."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Env
from tests.unit.recipes.test_recipes import write_image_folder

pytestmark = pytest.mark.slow

TINY_FAST = [
    "--set",
    "resources.gpus=0",  # the local cloud is this CPU-only machine
    "--set",
    "data=./tiny-cifar",
    "--set",
    "epochs=2",
    "--set",
    "batch_size=20",
    "--set",
    'model_options={"widths": [4, 8, 8]}',
    "--set",
    "methods.patch_whitening.num_images=40",
    "--set",
    "threads=1",
    "--set",
    "data_workers=0",
]


def _cli_in(env: Env, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spotrun", *args],
        capture_output=True,
        text=True,
        env=env.vars,
        cwd=cwd,
        timeout=300,
    )


def test_recipes_listed_shown_and_cifar10_fast_launched_with_a_relative_data_path(
    env: Env, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    write_image_folder(work / "tiny-cifar", 10, train_per_class=8, eval_count=20)

    listed = env.cli("recipes", check=True).stdout
    assert "cifar10-fast" in listed and "cifar10-baseline" in listed
    shown = env.cli("recipes", "show", "cifar10-fast", check=True).stdout
    assert shown.startswith("cifar10-fast: CIFAR-10 in the airbench style")
    assert "bench/cifar10_time_to_accuracy.py" in shown

    # As the recipe asks (1 GPU), the CPU-only local cloud refuses, and says how to run here.
    refused = _cli_in(env, work, "launch", "cifar10-fast", "--set", "data=./tiny-cifar")
    assert refused.returncode == 2 and "--set resources.gpus=0" in refused.stderr
    assert env.runs() == []

    done = _cli_in(env, work, "launch", "cifar10-fast", "--name", "tiny-fast", *TINY_FAST)
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = env.runs()
    assert run["state"] == "succeeded" and run["recipe"] == "cifar10-fast"
    run_dir = env.home / "runs" / run["id"]
    recipe = json.loads((run_dir / "recipe.json").read_text())
    assert recipe["data"] == str((work / "tiny-cifar").resolve())  # pinned at launch
    assert recipe["model_options"] == {"widths": [4, 8, 8]} and recipe["epochs"] == 2
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2] and rows[-1]["step"] == 8  # 80 images / 20
