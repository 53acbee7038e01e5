"""What a sweep was asked for: the recipe, the search space, and how to run its trials.

The typed record stored with the sweep (the ledger's sweeps table keeps it as JSON and hands it
back as this model); spotrun.sweep.spec parses the command's words into it.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_serializer, model_validator

from spotrun.core.capacity_note import MAX_CAPACITY_WAIT_S
from spotrun.core.config import NAME_PATTERN, CloudName, SpotPolicy, StrictModel
from spotrun.core.launch_request import ResourceFlags

EarlyStop = Literal["asha", "hyperband", "none"]
# How trials get their values: every grid combination, independent random draws, or Optuna's
# model-based samplers, asked for one trial at a time as places free up; or population-based
# training (a population trained in segments, the worst continuing from the best's weights).
Search = Literal["random", "grid", "tpe", "cmaes", "qmc", "pbt"]
MODEL_SEARCHES: tuple[Search, ...] = ("tpe", "cmaes", "qmc")


class Range(StrictModel):
    """A numeric range to sample from: integers when the recipe key is an integer."""

    low: float
    high: float
    log: bool = False
    integer: bool = False

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low >= self.high:
            raise ValueError("a range needs LOW < HIGH, both finite numbers")
        if self.log and self.low <= 0:
            raise ValueError("a log range needs LOW > 0")
        return self

    def describe(self) -> str:
        low, high = (int(self.low), int(self.high)) if self.integer else (self.low, self.high)
        return f"{low}:{high}" + (":log" if self.log else "")


class SweepSpec(StrictModel):
    """Everything `spotrun sweep` was asked for, validated; stored with the sweep."""

    recipe: str
    overrides: list[str] = Field(default_factory=list, description="--set for every trial")
    grid: dict[str, list[str]] = Field(default_factory=dict)
    space: dict[str, Range] = Field(default_factory=dict)
    random: int | None = Field(None, ge=1, description="trials drawn at random from the space")
    seed: int = 0
    search: Search | None = Field(None, description="None: grid, or random with --random")
    trials: int | None = Field(None, ge=1, description="trials a model-based search proposes")
    max_parallel: int = Field(ge=1)
    gpus_per_trial: int = Field(0, ge=0)
    # every trial's resource flags; stored as the keys given, as before they were typed
    resources: ResourceFlags = Field(default_factory=ResourceFlags)
    cloud: CloudName = "local"
    max_cost_usd: float | None = Field(None, gt=0, allow_inf_nan=False)
    early_stop: EarlyStop = "none"
    grace_epochs: int = Field(1, ge=1, description="ASHA/Hyperband: epochs every trial gets")
    reduction_factor: int = Field(3, ge=2, description="ASHA/Hyperband: 1 in this many per rung")
    pbt_interval: int | None = Field(None, ge=1, description="PBT: epochs of one generation")
    pbt_perturb: float = Field(1.2, gt=1, allow_inf_nan=False, description="PBT: x or / this")
    pbt_quantile: float = Field(0.25, gt=0, le=0.5, description="PBT: bottom and top share")
    metric: str = "test_acc"
    mode: Literal["max", "min"] = "max"
    name: str | None = None
    env: dict[str, str] = Field(
        default_factory=dict,
        description="every trial's job environment: --env and the trackers' variables",
    )
    # Every trial's, as on launch (None: the settings' when the trial asks; sweeps stored before)
    wait_for_capacity_s: float | None = Field(None, ge=0, le=MAX_CAPACITY_WAIT_S)
    spot_policy: SpotPolicy = "spot"

    @field_serializer("resources")
    def _given_only(self, flags: ResourceFlags) -> dict[str, Any]:
        return flags.given()

    @model_validator(mode="after")
    def _name_is_safe(self) -> SweepSpec:
        if self.name is not None and not NAME_PATTERN.fullmatch(self.name):
            raise ValueError(
                "a sweep name is 1-63 characters of a-z, 0-9, '-' and '_', starting with a "
                "letter or digit"
            )
        return self
