"""`spotrun resume` on a succeeded run through the real CLI on the local cloud: with more
epochs it trains further from its last checkpoint (a note in its events); without a change
that gives it more to do it is refused, saying how to train further."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Env

pytestmark = pytest.mark.slow


def _epochs(run_dir: Path) -> list[int]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["epoch"] for line in lines]


def test_a_succeeded_run_trains_further_with_more_epochs(env: Env) -> None:
    done = env.cli("launch", "digits-fast", "--name", "short", "--set", "epochs=2", timeout=300)
    assert done.returncode == 0 and "succeeded" in done.stdout, done.stdout + done.stderr
    (run,) = env.runs()
    run_dir = env.home / "runs" / run["id"]
    assert _epochs(run_dir) == [1, 2]

    same = env.cli("resume", "short")
    assert same.returncode == 1, same.stderr
    assert "succeeded after its 2 epochs" in same.stderr
    assert "`spotrun resume short --set epochs=4`" in same.stderr  # how to train further
    fewer = env.cli("resume", "short", "--set", "epochs=2")
    assert fewer.returncode == 1 and "epochs=2 gives it no more to do" in fewer.stderr

    further = env.cli("resume", "short", "--set", "epochs=3", timeout=300)
    assert further.returncode == 0, further.stdout + further.stderr
    assert "training further to 3" in further.stderr
    assert "succeeded" in further.stdout and "epoch 3/3" in further.stdout
    assert _epochs(run_dir) == [1, 2, 3]  # on from its last checkpoint, not from zero
    assert "resumed at epoch 2 step 44" in (run_dir / "job.log").read_text()
    status: dict[str, Any] = json.loads(env.cli("status", "short", "--json", check=True).stdout)
    assert status["state"] == "succeeded" and status["id"] == run["id"]
    notes = [e["message"] for e in status["events"] if e["kind"] == "resume"]
    assert any("training further after success: epochs 2 -> 3" in n for n in notes), notes
