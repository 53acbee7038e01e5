"""Cloud providers: where a run's instances come from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotrun.core.errors import UsageError
from spotrun.core.lazy import lazy_module

if TYPE_CHECKING:
    from spotrun.cloud import local as _local_cloud
    from spotrun.cloud.aws import provider as _aws_provider
    from spotrun.cloud.base import Provider
    from spotrun.core.config import Settings
else:
    # loaded when a provider is asked for: `spotrun ls` loads this package and needs none;
    # private names, so `from spotrun.cloud import local` still finds the submodule itself
    _local_cloud = lazy_module("spotrun.cloud.local")  # libtmux and pydantic (~0.1 s)
    _aws_provider = lazy_module("spotrun.cloud.aws.provider")  # boto3 (~0.2 s): AWS runs only

CLOUDS = ("local", "aws")


def get_provider(name: str, settings: Settings) -> Provider:
    """The provider for a cloud name; AWS code is imported only when it is asked for."""
    if name == "local":
        local: Provider = _local_cloud.LocalProvider(settings)
        return local
    if name == "aws":
        aws: Provider = _aws_provider.AwsProvider(settings)
        return aws
    raise UsageError(f"unknown cloud '{name}'; choose one of: {', '.join(CLOUDS)}")
