"""The on-demand instance a cloud makes to be a home's controller host (`controller up --on
CLOUD`), picked by the cloud's name (a controller record's `kind`). Only AWS makes one; its
code (boto3) loads at the first call.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from spotrun.cloud.aws import answers
from spotrun.core.config import Settings
from spotrun.core.errors import UsageError
from spotrun.core.lazy import lazy_module

if TYPE_CHECKING:
    from spotrun.cloud.aws import controller_instance
    from spotrun.cloud.aws.controller_instance import ControllerInstance, ControllerState
else:
    # boto3 (~0.2 s): only a controller instance needs it
    controller_instance = lazy_module("spotrun.cloud.aws.controller_instance")

MACHINE_CLOUDS = ("aws",)


def _require(cloud: str) -> None:
    if cloud not in MACHINE_CLOUDS:
        raise UsageError(
            f"the {cloud} cloud makes no controller instance",
            hint=f"choose one of: {', '.join(MACHINE_CLOUDS)}, or an ssh:// host",
        )


def default_region(cloud: str, settings: Settings) -> str:
    """Where a controller instance is made when no region is named."""
    _require(cloud)
    return answers.region(settings)


def default_idle_stop_s(cloud: str, settings: Settings) -> float:
    """How long the instance idles before it stops itself when `up` names no time."""
    _require(cloud)
    return answers.controller_idle_stop_s(settings)


def launch(
    cloud: str, settings: Settings, region: str, instance_type: str | None, keys_dir: Path
) -> ControllerInstance:
    """Start the controller's instance and wait until it runs and has an address."""
    _require(cloud)
    return controller_instance.launch(settings, region, instance_type, keys_dir)


def describe(cloud: str, settings: Settings, region: str, instance_id: str) -> ControllerState:
    """The controller instance as its cloud sees it now."""
    _require(cloud)
    return controller_instance.describe(settings, region, instance_id)


def start(cloud: str, settings: Settings, region: str, instance_id: str, timeout_s: float) -> str:
    """Start the stopped controller instance; its address once it runs."""
    _require(cloud)
    return controller_instance.start(settings, region, instance_id, timeout_s)


def stop_self(cloud: str, settings: Settings, region: str, instance_id: str) -> None:
    """Stop this controller instance (run on the instance itself)."""
    _require(cloud)
    controller_instance.stop_self(settings, region, instance_id)


def terminate(
    cloud: str, settings: Settings, region: str, instance_id: str, resource_id: str
) -> list[str]:
    """Terminate the controller instance with its network; what could not be deleted."""
    _require(cloud)
    return controller_instance.terminate(settings, region, instance_id, resource_id)
