"""What a cloud named by a run's spec or a command offers beyond its Provider, for the layers
above cloud: the cloud is picked by its name here, and only an AWS name loads AWS's code.

With get_provider (spotrun.cloud) this is the one door into spotrun.cloud.aws from above
(.importlinter: "Only spotrun.cloud imports spotrun.cloud.aws"). S3 (s3:// data sets) and EBS
snapshots are AWS's alone, so their functions need no name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spotrun.cloud.aws import answers
from spotrun.core.config import Resources, Settings
from spotrun.core.lazy import lazy_module

if TYPE_CHECKING:
    from spotrun.cloud.aws import datasets as aws_datasets
    from spotrun.cloud.aws import doctor as aws_doctor
    from spotrun.cloud.aws import gc as aws_gc
    from spotrun.cloud.aws import provider as aws_provider
    from spotrun.cloud.aws import volumes as aws_volumes
    from spotrun.cloud.aws.datasets import S3Store
    from spotrun.cloud.aws.doctor import Check
    from spotrun.cloud.aws.gc import Orphan
    from spotrun.cloud.ranking import DataSite
else:
    # boto3 (~0.2 s), loaded at a first use: s3:// data, a snapshot, gc, `spotrun doctor`
    aws_datasets = lazy_module("spotrun.cloud.aws.datasets")
    aws_doctor = lazy_module("spotrun.cloud.aws.doctor")
    aws_gc = lazy_module("spotrun.cloud.aws.gc")
    aws_provider = lazy_module("spotrun.cloud.aws.provider")
    aws_volumes = lazy_module("spotrun.cloud.aws.volumes")


@dataclass(frozen=True)
class WatcherCommand:
    """The module an instance runs beside the job (`python -m MODULE`), and its cloud's own
    arguments after the common ones."""

    module: str
    args: tuple[str, ...]


def launch_caveat(cloud: str, settings: Settings) -> str | None:
    """What a run's instances on `cloud` will not be able to do, said at launch; None: all."""
    return answers.launch_caveat(settings) if cloud == "aws" else None


def instance_watcher(cloud: str, settings: Settings) -> WatcherCommand | None:
    """The agent's watcher on `cloud`'s instances; None for a cloud whose instances have none."""
    if cloud != "aws":
        return None
    return WatcherCommand(answers.WATCHER_MODULE, tuple(answers.watcher_args(settings)))


def data_bucket(settings: Settings) -> str | None:
    """The configured bucket that s3:// data sets go to when none is named."""
    return answers.data_bucket(settings)


def default_region(settings: Settings) -> str:
    """The region AWS work goes to when none is named."""
    return answers.region(settings)


def gpu_type_patterns(settings: Settings) -> list[str]:
    """The instance type patterns `prices` searches for GPU offers (AWS's catalog)."""
    return answers.gpu_type_patterns(settings)


def s3_store(bucket: str, *, connections: int = 64) -> S3Store:
    """The object store of an s3:// data set's bucket."""
    return aws_datasets.S3Store(bucket, connections=connections)


def s3_data_site(uri: str) -> DataSite:
    """Where the S3 data set at `uri` lives (its bucket's region) and its size."""
    return aws_datasets.data_site(uri)


def check_snapshot(snapshot_id: str, region: str | None, settings: Settings) -> None:
    """An EBS snapshot's data set exists in `region` (default the configured one)."""
    aws_volumes.snapshot_of(snapshot_id, region, settings)


def find_orphans(settings: Settings, live_runs: set[str]) -> list[Orphan]:
    """What spotrun made on AWS that no live run owns, in every configured region."""
    return aws_gc.find_orphans(settings, live_runs)


def remove_orphans(settings: Settings, orphans: list[Orphan]) -> dict[Orphan, str | None]:
    """Each orphan removed (None) or why not."""
    return aws_gc.remove(settings, orphans)


def doctor(settings: Settings, wanted: Resources, region: str | None = None) -> list[Check]:
    """One Check per thing a first AWS launch needs, in order (nothing is created)."""
    if region:
        settings = answers.in_region(settings, region)
    return aws_doctor.Doctor(aws_provider.AwsProvider(settings), wanted).run()
