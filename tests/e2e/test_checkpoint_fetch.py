"""A replacement fetches the run's newest whole checkpoint from the durable store itself.

`python -m spotrun.cloud.aws.checkpoints fetch` is what the controller runs on a replacement
instance (tests/e2e/test_spot_recovery.py runs it there through the lab); here it runs against
moto's S3 on this machine: a torn newest upload is skipped for the one before it, and nothing
older than the step asked for is fetched (the controller pushes its own copy then).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from spotlab.lab import REGION
from spotlab.s3bucket import s3_bucket
from spotrun.cloud.aws import checkpoints as store
from spotrun.core.checkpoint_files import checkpoint_is_complete
from tests.conftest import REPO

__all__ = ["s3_bucket"]  # a fixture

RUN_ID = "fetchrun0001"


def _store(client: Any, bucket: str, work: Path, step: int, *, torn: bool = False) -> bytes:
    path = work / f"ckpt-{step:09d}.pt"
    torch.save({"format": 2, "w": torch.arange(2000.0) * step}, path)
    data = path.read_bytes()
    body = data[: len(data) // 2] if torn else data
    key = f"{store.run_prefix(RUN_ID)}checkpoints/{path.name}"
    client.put_object(Bucket=bucket, Key=key, Body=body)
    return data


def test_fetch_skips_a_torn_upload_and_never_goes_below_the_step_asked(
    s3_bucket: tuple[str, Any], tmp_path: Path
) -> None:
    name, client = s3_bucket
    s3 = store.s3_client(REGION)
    run_dir = tmp_path / "instance-run"
    assert store.fetch_checkpoint(s3, name, RUN_ID, run_dir, REGION, 0) == store.Fetched(
        None, None, []
    )
    whole = _store(client, name, tmp_path, 23)
    _store(client, name, tmp_path, 46, torn=True)  # the reclaim cut its upload
    fetched = store.fetch_checkpoint(s3, name, RUN_ID, run_dir, REGION, 0)
    assert fetched == store.Fetched("ckpt-000000023.pt", 23, ["ckpt-000000046.pt"])
    target = run_dir / "checkpoints" / "ckpt-000000023.pt"
    assert target.read_bytes() == whole and checkpoint_is_complete(target)
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no .part left
    # This machine holds step 30: the store has nothing whole that new.
    assert store.fetch_checkpoint(s3, name, RUN_ID, run_dir, REGION, 30).name is None


def test_fetch_command_prints_what_it_put_in_place(
    s3_bucket: tuple[str, Any], tmp_path: Path
) -> None:
    name, client = s3_bucket
    _store(client, name, tmp_path, 23)
    _store(client, name, tmp_path, 69)
    run_dir = tmp_path / "instance-run"
    proc = subprocess.run(
        [sys.executable, "-m", "spotrun.cloud.aws.checkpoints", "fetch", "--run-dir", str(run_dir)]
        + ["--run-id", RUN_ID, "--bucket", name, "--region", REGION, "--at-least", "46"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    answer = store.Fetched.from_json(proc.stdout.strip().splitlines()[-1])
    assert answer == store.Fetched("ckpt-000000069.pt", 69, [])
    assert checkpoint_is_complete(run_dir / "checkpoints" / "ckpt-000000069.pt")
