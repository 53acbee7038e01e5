"""Cloud providers: where a run's instances come from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotrun.core.errors import UsageError

if TYPE_CHECKING:
    from spotrun.cloud.base import Provider
    from spotrun.core.config import Settings

CLOUDS = ("local", "aws")


def get_provider(name: str, settings: Settings) -> Provider:
    """The provider for a cloud name; AWS code is imported only when it is asked for."""
    if name == "local":
        # libtmux and pydantic (~0.1 s): `spotrun ls` loads this package and needs no provider
        from spotrun.cloud.local import LocalProvider

        return LocalProvider(settings)
    if name == "aws":
        from spotrun.cloud.aws import AwsProvider  # boto3 (~0.2 s): only an AWS run needs it

        aws: Provider = AwsProvider(settings)
        return aws
    raise UsageError(f"unknown cloud '{name}'; choose one of: {', '.join(CLOUDS)}")
