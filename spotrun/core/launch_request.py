"""What a launch was asked for, typed: one LaunchRequest travels from whoever launches (the CLI,
the library, a sweep's trials, the remote controller, which runs the same CLI) to the plan and
the LaunchSpec stored with the run.

Every field is None when it was not asked for: the recipe's resources, a task file's keys and
the settings fill what is left, through `over` and `resources_over` (the one merge).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, ValidationError, field_validator

from spotrun.core.capacity_note import MAX_CAPACITY_WAIT_S
from spotrun.core.config import (
    MAX_GPUS_PER_NODE,
    MAX_NODES,
    CloudName,
    Resources,
    SpotPolicy,
    StrictModel,
    describe_validation_error,
)
from spotrun.core.durations import MAX_HOURS
from spotrun.core.errors import UsageError


class ResourceFlags(StrictModel):
    """The resources a launch asked for, in Resources' words; None: not asked (the recipe's
    or the task file's, else Resources' default). A sweep stores these for every trial."""

    gpus: int | None = Field(None, le=MAX_GPUS_PER_NODE, description="GPUs per node")
    gpu_model: str | None = None
    gpu_memory_gb: float | None = Field(None, gt=0)
    instance_type: str | None = None
    region: str | None = None
    regions: list[str] | None = None
    zone: str | None = None
    spot: bool | None = None
    disk_gb: int | None = Field(None, ge=8)  # its upper bound: Resources', at the merge
    nodes: int | None = Field(None, le=MAX_NODES)

    @field_validator("gpus")
    @classmethod
    def _gpus_counted(cls, value: int | None) -> int | None:
        if value is not None and value < 0:  # 0: the run needs no GPU (as in a task file)
            raise UsageError(
                f"--gpus must be 0 or more, got {value}",
                hint="leave it out to use the recipe's own GPU count; 0 asks for no GPU",
            )
        return value

    @field_validator("nodes")
    @classmethod
    def _nodes_counted(cls, value: int | None) -> int | None:
        if value is not None and value < 1:  # a typo must not order a fleet, nor nothing
            raise UsageError(
                f"--nodes must be a whole number of at least 1, got {value}",
                hint="leave it out to run on one instance",
            )
        return value

    def given(self) -> dict[str, Any]:
        """The resource keys that were asked for."""
        return {
            key: value
            for key, value in self.model_dump(include=set(ResourceFlags.model_fields)).items()
            if value is not None
        }

    def resources_over(self, defaults: Resources) -> Resources:
        """The one merge: these flags over `defaults` (a recipe's resources, or Resources()
        for your own command), validated as Resources."""
        try:
            return Resources.model_validate({**defaults.model_dump(), **self.given()})
        except ValidationError as exc:
            raise UsageError(describe_validation_error(exc)) from exc


class LaunchRequest(ResourceFlags):
    """Everything a launch can be asked for: its resources, where, what it is called, its caps
    and its capacity terms. Built once by the caller; a bad field is a UsageError at once."""

    cloud: CloudName | None = None
    name: str | None = None
    max_cost_usd: float | None = Field(None, allow_inf_nan=False)
    max_hours: float | None = Field(None, le=MAX_HOURS, allow_inf_nan=False)
    wait_for_capacity_s: float | None = Field(None, ge=0, le=MAX_CAPACITY_WAIT_S)
    spot_policy: SpotPolicy | None = None

    def __init__(self, **fields: Any) -> None:
        # built from a person's words: one line naming the bad field (a stored spec that no
        # longer loads is the store's to report, through model_validate)
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise UsageError(describe_validation_error(exc, LaunchRequest)) from exc

    @field_validator("max_cost_usd")
    @classmethod
    def _cap_above_zero(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise UsageError(f"--max-cost must be above 0, got {value}")
        return value

    @field_validator("max_hours")
    @classmethod
    def _hours_above_zero(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise UsageError(f"--max-hours must be above 0, got {value:g}")
        return value

    def given(self) -> dict[str, Any]:
        flags = super().given()
        if self.spot_policy == "on-demand":  # every instance on-demand: no spot offers at all
            flags["spot"] = False
        return flags

    def resource_flags(self) -> ResourceFlags:
        """The resources part, as a sweep stores it for its trials."""
        return ResourceFlags.model_validate(self.given())

    def over(self, fallback: LaunchRequest) -> LaunchRequest:
        """This request's fields where given, `fallback`'s (a task file's) elsewhere."""
        given = self.model_dump(exclude_none=True)
        return LaunchRequest(**{**fallback.model_dump(exclude_none=True), **given})


def as_request(asked: LaunchRequest | Mapping[str, Any] | None) -> LaunchRequest:
    """A request, or one built from its keys (callers that still hand flags as a mapping)."""
    if isinstance(asked, LaunchRequest):
        return asked
    return LaunchRequest(**dict(asked or {}))
