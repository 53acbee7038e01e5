"""`spotrun doctor`: the checks of spotrun/cloud/aws/doctor.py with the user's settings."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from spotrun.core.config import Resources, Settings, describe_validation_error
from spotrun.core.errors import UsageError


def doctor(settings: Settings, resources: dict[str, Any]) -> list[Any]:
    """One Check per thing a first AWS launch needs, in order (nothing is created)."""
    # boto3 (~0.2 s): only for this command
    from spotrun.cloud.aws import AwsProvider
    from spotrun.cloud.aws.doctor import Doctor

    try:
        wanted = Resources.model_validate(resources)
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc)) from exc
    return Doctor(AwsProvider(settings), wanted).run()
