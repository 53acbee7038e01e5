"""What the layers above cloud ask of AWS through spotrun.cloud.by_name, answered from the [aws]
settings here, so that nothing outside spotrun.cloud.aws reads them. Light: no boto3."""

from __future__ import annotations

from spotrun.core.config import Settings

# What an AWS instance runs beside the job: spotrun.agent.watcher with the instance's S3
# uploads and its self-termination (started by module name, so no import here).
WATCHER_MODULE = "spotrun.cloud.aws.instance_watcher"


def launch_caveat(settings: Settings) -> str | None:
    """What a run's instances cannot do without an instance profile; None with one."""
    return settings.aws.without_credentials()


def watcher_args(settings: Settings) -> list[str]:
    """The watcher's AWS arguments: the bucket its checkpoints go to, when there is one."""
    return ["--bucket", settings.aws.bucket] if settings.aws.bucket else []


def data_bucket(settings: Settings) -> str | None:
    """The configured bucket (aws.bucket): where data sets and checkpoints go by default."""
    return settings.aws.bucket


def region(settings: Settings) -> str:
    """The configured region (aws.region)."""
    return settings.aws.region


def in_region(settings: Settings, region_name: str) -> Settings:
    """`settings` with aws.region replaced."""
    aws = settings.aws.model_copy(update={"region": region_name})
    return settings.model_copy(update={"aws": aws})


def gpu_type_patterns(settings: Settings) -> list[str]:
    """The instance type patterns searched for GPU offers (aws.gpu_instance_types)."""
    return list(settings.aws.gpu_instance_types)


def controller_idle_stop_s(settings: Settings) -> float:
    """`controller up --on aws`'s idle stop when none is given (aws.controller_idle_stop_s)."""
    return settings.aws.controller_idle_stop_s
