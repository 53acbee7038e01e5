"""The checkpoint uploader on an instance, controlled over its runner.

It is `python -m spotrun.cloud.aws.checkpoints push --watch` in the background (setsid, its pid in
the run folder), pushing new checkpoints to S3 until the job has ended. Before an instance is
terminated `flush` makes sure the last checkpoint is stored.
"""

from __future__ import annotations

import logging
import shlex

from spotrun.core.errors import LocalFileError, RemoteError
from spotrun.core.rundir import EXIT_FILE, UPLOADER_LOG_FILE, UPLOADER_PID_FILE
from spotrun.remote.detached import start_once
from spotrun.remote.runner import Runner

log = logging.getLogger(__name__)

WATCH_S = 5.0


def push_command(
    python: str, run_dir: str, run_id: str, bucket: str, region: str, watch_s: float
) -> str:
    return shlex.join(
        [
            python,
            "-m",
            "spotrun.cloud.aws.checkpoints",
            "push",
            "--run-dir",
            run_dir,
            "--run-id",
            run_id,
            "--bucket",
            bucket,
            "--region",
            region,
            "--watch",
            str(watch_s),
        ]
    )


def start(runner: Runner, run_dir: str, watch_command: str) -> None:
    """Start the uploader unless it already runs (idempotent)."""
    start_once(
        runner,
        run_dir,
        # --since: the moment it was asked for, in the instance's clock. Its own clock starts
        # after python and boto3 load, by when a quick job may already have ended.
        f'{watch_command} --since "$(date +%s)"',
        pid_file=UPLOADER_PID_FILE,
        log_file=UPLOADER_LOG_FILE,
        what="starting the checkpoint uploader",
    )


def flush(runner: Runner, run_dir: str, once_command: str, what: str) -> None:
    """The last upload before the instance ends (best effort: logged, never raised).

    When the job has ended the uploader makes its final push and exits by itself: wait for
    that. Otherwise (a stop, a failure) push once more here.
    """
    folder = shlex.quote(run_dir)
    command = (
        f"cd {folder} 2>/dev/null || exit 0; "
        f"if test -f {EXIT_FILE} && test -f {UPLOADER_PID_FILE}; then "
        f"for i in $(seq 3000); do kill -0 $(cat {UPLOADER_PID_FILE}) 2>/dev/null || exit 0; "
        "sleep 0.1; done; fi; "
        f"{once_command}"
    )
    try:
        result = runner.run(command, timeout_s=330)
    except (RemoteError, LocalFileError) as exc:  # a damaged host-key pin here: ends anyway
        log.warning("could not flush the checkpoints of %s to S3: %s", what, exc.message)
        return
    if not result.ok:
        log.warning("flushing the checkpoints of %s to S3 failed: %s", what, result.stderr[-300:])
