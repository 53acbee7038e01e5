"""The AWS provider: boto3 is imported in this package and nowhere else in spotrun.

The package itself imports nothing heavy: `spotrun.cloud.by_name` reads the [aws] settings
through `answers` (light), and AwsProvider (boto3, ~0.2 s) loads at its first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spotrun.core.lazy import lazy_module

if TYPE_CHECKING:
    from spotrun.cloud.aws import provider as _provider
    from spotrun.cloud.aws.provider import AwsProvider
else:
    # boto3 (~0.2 s): only a caller that makes an AWS provider pays for it
    _provider = lazy_module("spotrun.cloud.aws.provider")

__all__ = ["AwsProvider"]


def __getattr__(name: str) -> Any:
    if name == "AwsProvider":
        return _provider.AwsProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
