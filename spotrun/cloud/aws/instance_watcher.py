"""`python -m spotrun.cloud.aws.instance_watcher --run-dir ... --run-id ...`: the agent's
watcher (spotrun.agent.watcher) on an EC2 instance, with the instance's own AWS parts.

The controller starts it beside the job (spotrun.control.watcher_start). The parts: S3 under
--bucket for the checkpoints and the final files (spotrun.cloud.aws.checkpoints), and
TerminateInstances for the instance's self-termination. Both run with the instance profile's
permissions, read through IMDSv2 by boto3; no credentials are copied to the instance.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from spotrun.agent.imds import Imds
from spotrun.agent.watcher import WatchConfig, Watcher, argument_parser, config_from
from spotrun.core.config import load_settings
from spotrun.core.errors import CloudError
from spotrun.core.lazy import lazy_module

if TYPE_CHECKING:
    import boto3.exceptions as boto3_errors
    import boto3.session as boto3_session
    import botocore.exceptions as botocore_errors

    from spotrun.cloud.aws import checkpoints
else:
    # boto3 (~0.5 s of CPU on an instance): the watcher mostly polls the metadata service and
    # needs it only to upload after a notice or to end its instance, which most runs never do
    boto3_errors = lazy_module("boto3.exceptions")
    boto3_session = lazy_module("boto3.session")
    botocore_errors = lazy_module("botocore.exceptions")
    checkpoints = lazy_module("spotrun.cloud.aws.checkpoints")

REGION_PATH = "meta-data/placement/region"


class S3RunUploader:
    """The run's durable files in s3://BUCKET/runs/RUN/ (the instance's own under
    instances/ID/, where a later instance's files never meet them)."""

    def __init__(self, bucket: str, region: str) -> None:
        self.bucket = bucket
        self.region = region

    @property
    def where(self) -> str:
        return f"s3://{self.bucket}"

    def upload(
        self, run_dir: Path, run_id: str, instance_id: str | None, final_files: tuple[str, ...]
    ) -> list[str]:
        try:
            s3 = checkpoints.s3_client(self.region)
            uploaded = checkpoints.push(s3, self.bucket, run_id, run_dir, self.region).uploaded
            prefix = f"{checkpoints.run_prefix(run_id)}instances/{instance_id or 'unknown'}/"
            for name in final_files:
                path = run_dir / name
                if path.exists():
                    s3.upload_file(str(path), self.bucket, prefix + name)
                    uploaded.append(f"instances/{instance_id}/{name}")
        except (
            botocore_errors.BotoCoreError,
            botocore_errors.ClientError,
            boto3_errors.S3UploadFailedError,
        ) as exc:
            raise CloudError(f"{type(exc).__name__}: {exc}") from exc
        return uploaded


class Ec2SelfTerminator:
    """TerminateInstances on the instance's own id, in its region (asked of the metadata
    service when not given)."""

    def __init__(self, region: str | None, imds: Imds) -> None:
        self.region = region
        self.imds = imds

    def terminate(self, instance_id: str) -> None:
        region = self.region or self.imds.get(REGION_PATH)
        try:
            ec2 = boto3_session.Session().client("ec2", region_name=region)
            ec2.terminate_instances(InstanceIds=[instance_id])
        except (botocore_errors.BotoCoreError, botocore_errors.ClientError) as exc:
            raise CloudError(f"{type(exc).__name__}: {exc}") from exc


def aws_watcher(config: WatchConfig, *, bucket: str | None, region: str | None) -> Watcher:
    """The watcher with S3 uploads (when there is a bucket and a region) and EC2's
    self-termination."""
    imds = Imds(config.metadata_url)
    store = S3RunUploader(bucket, region) if bucket and region else None
    return Watcher(config, imds, store=store, terminator=Ec2SelfTerminator(region, imds))


def main(argv: list[str]) -> int:
    parser = argument_parser("python -m spotrun.cloud.aws.instance_watcher")
    parser.add_argument("--bucket")
    parser.add_argument("--region")
    args = parser.parse_args(argv)
    metadata_url = args.metadata_url or load_settings().aws.metadata_url
    config = config_from(args, metadata_url)
    return aws_watcher(config, bucket=args.bucket, region=args.region).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
