"""`spotrun doctor`: the checks of spotrun/cloud/aws/doctor.py with the user's settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spotrun.cloud.by_name import doctor as aws_doctor
from spotrun.core.config import Resources, Settings
from spotrun.core.launch_request import LaunchRequest, as_request


def doctor(
    settings: Settings,
    resources: LaunchRequest | Mapping[str, Any],
    region: str | None = None,
) -> list[Any]:
    """One Check per thing a first AWS launch needs, in order (nothing is created); `region`
    in place of the configured one."""
    wanted = as_request(resources).resources_over(Resources())
    return aws_doctor(settings, wanted, region)
