"""A launch states how the recipe's global batch is made on the GPUs it asks for, and refuses
GPUs that cannot split it before anything exists (issue 35, point 1)."""

from __future__ import annotations

from spotlab import Lab
from tests.conftest import Env
from tests.e2e.test_bad_input import assert_one_line_error


def test_dry_run_says_how_the_global_batch_is_made(aws_env: Env, lab: Lab) -> None:
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws", "--gpus", "2", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "global batch: 64 images per step = 2 GPUs x 32" in proc.stdout
    assert aws_env.runs() == [] and lab.instances() == []


def test_gpus_that_cannot_split_the_global_batch_launch_nothing(aws_env: Env, lab: Lab) -> None:
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws", "--gpus", "3", "-d")
    assert_one_line_error(proc, 2, "global batch of 64", "does not split evenly over 3")
    assert aws_env.runs() == [] and lab.instances() == []
    assert not (aws_env.home / "runs").exists() or not any((aws_env.home / "runs").iterdir())
