"""S3's throttling (SlowDown, 503) and its internal errors (500), injected by the lab's front
as S3 sends them, met by the instance's checkpoint uploader (`python -m
spotrun.cloud.aws.checkpoints push --watch`), the process that stores a run's checkpoints."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from spotlab import Lab
from spotrun.cloud.aws.checkpoints import run_prefix
from spotrun.core.rundir import CHECKPOINTS_DIR, EXIT_FILE, METRICS_FILE
from tests.helpers import WAIT_SCALE

RUN_ID = "s3burst0001"


def test_an_upload_burst_under_s3_slowdown_and_internal_errors_stores_everything(
    lab: Lab, tmp_path: Path
) -> None:
    """A checkpoint big enough for a multipart upload and a metrics file, stored by the
    uploader after its job ended, while S3 throttles and fails: botocore's retries ride out
    the short bursts, and a PutObject throttled for longer than one call's retries (9 times,
    8 attempts a call) is stored by the uploader's next round instead of being lost."""
    assert lab.bucket is not None
    run_dir = tmp_path / "run"
    (run_dir / CHECKPOINTS_DIR).mkdir(parents=True)
    checkpoint = os.urandom(20 * 1024 * 1024)  # 20 MB: three parts of 8 MB
    (run_dir / CHECKPOINTS_DIR / "ckpt-000000010.pt").write_bytes(checkpoint)
    (run_dir / METRICS_FILE).write_text('{"step": 10, "loss": 0.5}\n')
    (run_dir / EXIT_FILE).write_text('{"exit_code": 0}\n')  # the job has ended
    slow_parts = lab.faults.s3("UploadPart", "SlowDown", times=3)
    broken_complete = lab.faults.s3("CompleteMultipartUpload", "InternalError", times=2)
    long_burst = lab.faults.s3("PutObject", "SlowDown", times=9)
    since = time.time() - 5  # the uploader was asked for before the job ended

    uploader = subprocess.run(
        [
            sys.executable,
            "-m",
            "spotrun.cloud.aws.checkpoints",
            "push",
            "--run-dir",
            str(run_dir),
            "--run-id",
            RUN_ID,
            "--bucket",
            lab.bucket,
            "--region",
            "us-east-1",
            "--watch",
            "0.5",
            "--since",
            str(since),
        ],
        env={**os.environ, **lab.config.env()},
        capture_output=True,
        text=True,
        timeout=300 * WAIT_SCALE,
    )

    assert uploader.returncode == 0, uploader.stderr[-2000:]
    assert (slow_parts.hits, broken_complete.hits, long_burst.hits) == (3, 2, 9)
    assert "SlowDown" in uploader.stderr  # the round that gave up said why
    prefix = run_prefix(RUN_ID)
    stored = lab.s3.get_object(
        Bucket=lab.bucket, Key=f"{prefix}{CHECKPOINTS_DIR}/ckpt-000000010.pt"
    )
    assert stored["Body"].read() == checkpoint
    metrics = lab.s3.get_object(Bucket=lab.bucket, Key=prefix + METRICS_FILE)["Body"].read()
    assert metrics == b'{"step": 10, "loss": 0.5}\n'
