"""A run's files in S3 (aws.bucket), as the provider drives them: the instance's uploader
(started with the job, flushed before the instance ends), a replacement's own fetch of the
newest whole checkpoint, the controller's pull of what it lacks, and `spotrun rm`'s delete.
The transfers themselves are spotrun.cloud.aws.checkpoints; without a bucket all is a no-op.

`python` and `remote_dir` are the instance's spotrun interpreter and the run's folder there.
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
from pathlib import Path

from spotrun.cloud.aws import checkpoints, uploader
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.base import Instance
from spotrun.core.config import AwsSettings
from spotrun.remote.runner import Runner

log = logging.getLogger(__name__)

# A replacement's download of the newest checkpoint from S3 (multi-GB in the region: minutes).
FETCH_TIMEOUT_S = 1800.0


class DurableStore:
    def __init__(self, clients: AwsClients, aws: AwsSettings) -> None:
        self.clients = clients
        self.aws = aws

    def _push_command(
        self, instance: Instance, python: str, remote_dir: str, watch_s: float
    ) -> str:
        return uploader.push_command(
            python, remote_dir, instance.run_id, str(self.aws.bucket), instance.region, watch_s
        )

    def start_uploader(
        self, instance: Instance, runner: Runner, python: str, remote_dir: str
    ) -> None:
        """The instance keeps the checkpoints of `instance.run_id` in S3 as they come."""
        if self.aws.bucket:
            command = self._push_command(instance, python, remote_dir, uploader.WATCH_S)
            uploader.start(runner, remote_dir, command)

    def flush(self, instance: Instance, runner: Runner, python: str, remote_dir: str) -> None:
        """The last upload before the instance ends (best effort)."""
        if self.aws.bucket:
            command = self._push_command(instance, python, remote_dir, 0.0)
            uploader.flush(runner, remote_dir, command, instance.id)

    def fetch_checkpoint(
        self, instance: Instance, runner: Runner, python: str, remote_dir: str, at_least: int
    ) -> checkpoints.Fetched | None:
        """Have `instance` download the run's newest whole checkpoint of step `at_least` or
        later from S3 itself (a replacement: in-region, with its instance profile); None when
        the run has no store or the instance could not fetch (the caller pushes instead)."""
        if not self.aws.bucket:
            return None
        command = shlex.join(
            [
                python,
                "-m",
                "spotrun.cloud.aws.checkpoints",
                "fetch",
                "--run-dir",
                remote_dir,
                "--run-id",
                instance.run_id,
                "--bucket",
                str(self.aws.bucket),
                "--region",
                self.aws.region,  # the bucket's, wherever the instance is
                "--at-least",
                str(at_least),
            ]
        )
        result = runner.run(command, timeout_s=FETCH_TIMEOUT_S)
        lines = result.stdout.strip().splitlines()
        if not result.ok or not lines:
            log.warning(
                "%s could not fetch a checkpoint from S3: %s", instance.id, result.stderr[-300:]
            )
            return None
        try:
            fetched = checkpoints.Fetched.from_json(lines[-1])
        except (ValueError, KeyError, TypeError):
            log.warning("%s: unexpected checkpoint fetch answer: %s", instance.id, lines[-1])
            return None
        return dataclasses.replace(fetched, store_region=self.aws.region)

    def pull(self, run_id: str, region: str, local_dir: Path) -> list[str]:
        """Fetch from S3 the run's stored files that `local_dir` lacks."""
        if not self.aws.bucket:
            return []
        s3 = self.clients.client("s3", region)
        return checkpoints.pull(s3, self.aws.bucket, run_id, local_dir, region)

    def delete(self, run_id: str, region: str) -> None:
        """Delete the run's stored files (`spotrun rm`)."""
        if not self.aws.bucket:
            return
        s3 = self.clients.client("s3", region)
        count = checkpoints.delete_run(s3, self.aws.bucket, run_id, region)
        if count:
            log.info("run %s: deleted %d stored file(s) in s3://%s", run_id, count, self.aws.bucket)
