"""The [run] settings: how a run is driven, the same on every cloud.

These keys once lived under [aws]; a config file (or a Settings built from a dict) that still
sets them there is read as before: `move_old_run_keys` moves each to [run] before validation.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from spotrun.core.durations import MAX_SECONDS
from spotrun.core.errors import UsageError

MAX_DISK_GB = 65536  # EBS volumes end at 64 TiB


class RunSettings(BaseModel):
    # as core.config.StrictModel (which this module cannot import: config imports it)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    ssh_timeout_s: float = Field(
        600.0, gt=0, le=MAX_SECONDS, description="boot + SSH banner wait, then terminate"
    )
    root_volume_gb: int = Field(
        200, ge=8, le=MAX_DISK_GB, description="an instance's disk when a launch sets none"
    )
    # Surviving spot (spotrun.control.recovery, spotrun.agent.watcher)
    notice_poll_s: float = Field(
        5.0, gt=0, le=5.0, description="how often the instance's agent asks for a spot notice"
    )
    unreachable_s: float = Field(
        60.0, gt=0, le=MAX_SECONDS, description="a running instance silent this long is replaced"
    )
    end_grace_s: float = Field(
        300.0,
        gt=0,
        le=MAX_SECONDS,
        description="after its job ends, an instance no controller collected ends itself",
    )
    no_progress_s: float = Field(
        3600.0,
        ge=0,
        le=MAX_SECONDS,
        description="a job whose log, metrics, data staging and checkpoints have not moved this "
        "long is stopped (it checkpoints) and its instance ended; 0 = never. A silent "
        "controller never ends a job.",
    )
    reclaim_margin_s: float = Field(
        60.0,
        gt=0,
        le=MAX_SECONDS,
        description="a noticed instance left for the cloud to reclaim (on EC2 its first hour "
        "is then not billed) is terminated by spotrun if it has not been reclaimed this long "
        "after the notice's time",
    )
    gpu_mismatch: Literal["fail", "replace", "warn"] = Field(
        "fail",
        description="when torch on the instance sees other than its type's GPUs (a broken "
        "driver or CUDA) before the job starts: fail the run, replace the instance (twice at "
        "most), or warn and run anyway",
    )
    # Multi-node runs (--nodes; spotrun.control.cluster)
    max_nodes: int = Field(16, ge=1, description="the most instances one run may have")
    rendezvous_port: int = Field(29400, ge=1, le=65535, description="torchrun's c10d port")
    cluster_env: dict[str, str] = Field(
        default_factory=dict, description="multi-node job environment, over spotrun's NCCL/EFA"
    )
    cluster_replace_s: float = Field(
        300.0,
        gt=0,
        le=MAX_SECONDS,
        description="how long a lost node's replacement is sought in the cluster's zone "
        "before the whole cluster moves",
    )


# Keys a config file may still set under [aws], their old home.
MOVED_FROM_AWS = tuple(RunSettings.model_fields)


def move_old_run_keys(data: dict[str, object]) -> dict[str, object]:
    """`data` (Settings' keys) with the [aws] keys that moved to [run] moved there; a key set
    in both places is refused, since neither can be said to win."""
    aws = data.get("aws")
    if not isinstance(aws, dict) or not any(k in aws for k in MOVED_FROM_AWS):
        return data
    run = data.get("run", {})
    if not isinstance(run, dict):  # a RunSettings object: the new spelling, given whole
        run = run.model_dump(exclude_unset=True) if isinstance(run, BaseModel) else {}
    old = {k: v for k, v in aws.items() if k in MOVED_FROM_AWS}
    both = sorted(k for k in old if k in run)
    if both:
        raise UsageError(
            f"{', '.join(f'aws.{k}' for k in both)} and run.{both[0]} both set",
            hint="keep the [run] one (the [aws] spelling is the older one)",
        )
    rest = {k: v for k, v in aws.items() if k not in MOVED_FROM_AWS}
    return {**data, "aws": rest, "run": {**run, **old}}


def old_spelling(message: str, data: dict[str, object]) -> str:
    """A validation message about a key the user wrote under [aws] names it as written."""
    aws = data.get("aws")
    if not isinstance(aws, dict):
        return message
    for key in MOVED_FROM_AWS:
        if key in aws:
            message = message.replace(f"run.{key}", f"aws.{key} (now run.{key})")
    return message
