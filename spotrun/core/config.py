"""Typed configuration: user settings, the resources a job asks for, and a launch spec.

Every model forbids unknown keys, so a typo in config.toml or a task file is an error that names
the key instead of a setting silently ignored.
"""

from __future__ import annotations

import getpass
import logging
import re
import sys
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from spotrun.core.capacity_note import MAX_CAPACITY_WAIT_S
from spotrun.core.durations import MAX_HOURS, MAX_SECONDS
from spotrun.core.errors import UsageError
from spotrun.core.home import CONFIG_FILE, LEDGER_FILE, RUNS_FOLDER, default_home
from spotrun.core.jobspec import JobSpec
from spotrun.core.rundir import HOME_VAR
from spotrun.core.settings_run import MAX_DISK_GB as MAX_DISK_GB  # Resources and task files
from spotrun.core.settings_run import (
    MOVED_FROM_AWS,
    RunSettings,
    move_old_run_keys,
    old_spelling,
)
from spotrun.core.suggest import unknown_key

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

# The AWS Deep Learning Base AMI (NVIDIA driver, CUDA, Ubuntu 22.04), published by AWS in SSM.
DEFAULT_IMAGE_SSM_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
)

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")

CloudName = Literal["local", "aws"]
SpotPolicy = Literal["spot", "auto", "on-demand"]  # as SPOT_POLICIES (core.capacity_note)


# Bounds on counts that drive work or money, so that a typo (gpus: 80000) is refused at launch.
MAX_GPUS_PER_NODE = 64  # the largest instances have 8-16
MAX_NODES = 1024


class StrictModel(BaseModel):
    # no setting is infinite: `1e400` in TOML is inf, a timeout that never ends
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class AwsSettings(StrictModel):
    region: str = "us-east-1"
    regions: list[str] = Field(
        default_factory=list,
        description="regions a launch may use (--regions names some of them) and `gc` sweeps; "
        "[] = region only",
    )
    image_id: str | None = Field(None, description="an AMI id; wins over image_ssm_parameter")
    image_ssm_parameter: str = DEFAULT_IMAGE_SSM_PARAMETER
    architecture: Literal["x86_64", "arm64"] = Field(
        "x86_64", description="CPU architecture of the image; only types that run it are offered"
    )
    bucket: str | None = Field(None, description="S3 bucket for checkpoints (durable store)")
    ssh_address: Literal["public", "private"] = "public"
    ssh_user: str = "ubuntu"
    ssh_port: int = Field(22, ge=1, le=65535)
    ssh_cidr: str | None = Field(
        None, description="who may reach SSH; default this machine's own address as a /32"
    )
    caller_ip_url: str = Field(
        "https://checkip.amazonaws.com", description="answers this machine's public address"
    )
    data_cache_volume: bool = Field(
        False,
        description="stage s3:// data onto an EBS volume of the run's that a replacement "
        "instance in the same zone reattaches (it fetches only the shards missing on it)",
    )
    subnet_id: str | None = None
    subnet_ids: list[str] = Field(
        default_factory=list,
        description="subnets to launch in (one per zone; a launch uses its region's); "
        "[] = the region's default VPC",
    )
    instance_profile: str | None = Field(None, description="IAM instance profile name")
    controller_instance_profile: str | None = Field(
        None,
        description="instance profile of `controller up --on aws`'s instance: its role holds "
        "the README's user policy",
    )
    controller_idle_stop_s: float = Field(
        1800.0,
        ge=0,
        le=MAX_SECONDS,
        description="`controller up --on aws`'s instance stops itself when nothing has been "
        "live and no command has come for this long (the next command starts it); 0 = never",
    )
    python: str = Field("python3", description="python on the instance that runs spotrun")
    remote_root: str | None = Field(
        None, description="spotrun's folder on the instance; default ~/.spotrun of ssh_user"
    )
    metadata_url: str = "http://169.254.169.254"
    metadata_hop_limit: int = Field(
        1,
        ge=1,
        le=2,
        description="network hops the instance metadata service answers: 2 lets containers "
        "on the instance (Docker's bridge) read it and the instance role's credentials",
    )
    gpu_instance_types: list[str] = Field(
        default_factory=lambda: ["g*", "p*"], description="type patterns searched for GPU offers"
    )
    cpu_instance_types: list[str] = Field(
        default_factory=lambda: ["c6i.*", "c7i.*", "m6i.*", "m7i.*"],
        description="type patterns offered to recipes that need no GPU",
    )
    expires_after_hours: float = Field(
        24.0,
        gt=0,
        le=MAX_HOURS,
        description="spotrun:expires tag when a launch sets no --max-hours",
    )
    pricing_api: bool = Field(True, description="ask the Pricing API for on-demand prices")
    max_attempts: int = Field(8, ge=1, description="calls per request, throttling retries included")
    poll_s: float = Field(
        2.0, gt=0, le=MAX_SECONDS, description="how often the controller looks at a job"
    )
    consistency_s: float = Field(
        120.0,
        gt=0,
        le=MAX_SECONDS,
        description="how long a new instance may be unknown to EC2's describe calls "
        "(eventual consistency) before spotrun takes it as gone",
    )

    def without_credentials(self) -> str | None:
        """What a run's instances cannot do without an instance profile (EC2 then gives them
        no credentials at all), said at launch; None with one."""
        if self.instance_profile:
            return None
        stored = f"store checkpoints in s3://{self.bucket}, " if self.bucket else ""
        return (
            "no aws.instance_profile: the instance gets no AWS credentials, so it cannot "
            f"{stored}end itself when the controller is away, or read s3:// data; a "
            "replacement resumes only from what was synced here"
        )


def aws_table(table: dict[str, object]) -> AwsSettings:
    """AwsSettings from an [aws] table as a config file may spell it: the keys that moved to
    [run] (core.settings_run) are left to Settings, which reads them there."""
    return AwsSettings.model_validate({k: v for k, v in table.items() if k not in MOVED_FROM_AWS})


class Settings(StrictModel):
    home: Path
    default_cloud: CloudName = "local"
    owner: str = Field(default_factory=getpass.getuser)
    max_cost_usd: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="default budget for every launch"
    )
    controller: Literal["one", "per-run"] = Field(
        "one",
        description="one: a single controller process drives every live run and sweep of this "
        "home (started by any command when something is live, gone when nothing is); "
        "per-run: a supervisor process per run and per sweep",
    )
    budget_check_s: float = Field(
        30.0, gt=0, le=MAX_SECONDS, description="how often a capped run is projected"
    )
    budget_stop_margin_s: float = Field(
        180.0,
        ge=0,
        le=MAX_SECONDS,
        description="seconds a budget stop takes: checkpoint, sync, terminate",
    )
    # Waiting for capacity (spotrun.control.capacity_wait): a request no offer fills is
    # asked again with backoff until this bound, then the run fails with what was tried.
    wait_for_capacity_s: float = Field(
        0.0,
        ge=0,
        le=MAX_CAPACITY_WAIT_S,
        description="how long a run that finds no capacity waits for it, asking again with "
        "backoff (--wait-for-capacity); 0 = fail at once",
    )
    capacity_ask_first_s: float = Field(
        30.0, gt=0, le=MAX_SECONDS, description="the first pause before capacity is asked again"
    )
    capacity_ask_max_s: float = Field(
        600.0, gt=0, le=MAX_SECONDS, description="the longest pause between asks for capacity"
    )
    spot_policy: SpotPolicy = Field(
        "spot",
        description="spot; auto: on-demand when spot cannot be had within the wait (spot "
        "again at the next replacement); on-demand (--spot-policy)",
    )
    ledger_write_wait_s: float = Field(
        600.0,
        gt=0,
        le=MAX_SECONDS,
        description="how long a controller waits out a ledger or run folder it cannot write "
        "(read-only, disk full, I/O error) before it gives way to a fresh controller; the "
        "run's instances go on",
    )
    data_dir: Path | None = Field(
        None, description="where recipes find data sets by name (data=cifar10); None = home/data"
    )
    data_mirror: str | None = Field(
        None,
        description="a base URL that `spotrun data get` fetches known data sets from, by file "
        "name, in place of their public homes (a mirror on your network); None = their homes",
    )
    workdir_max_mb: float = Field(
        100.0, gt=0, description="the largest workdir a launch ships to an instance"
    )
    # Notifications (spotrun.notify): targets checked at launch, as --notify's are
    notify: list[str] = Field(
        default_factory=list,
        description="who is told of every run's and sweep's news when a launch gives no "
        "--notify: slack:URL, ntfy:URL, webhook:URL, smtp://user:pass@host:port/?to=ADDRESS",
    )
    notify_on: list[str] = Field(
        default_factory=list,
        description="the events told (--notify-on); empty = all but pruned",
    )
    notify_retry_first_s: float = Field(
        10.0,
        gt=0,
        le=MAX_SECONDS,
        description="the first pause before a notification that could not be sent is tried "
        "again (doubling each time, at most an hour, for a day)",
    )
    run: RunSettings = Field(
        default_factory=RunSettings,
        description="how runs are driven, on every cloud (these keys under [aws], their "
        "older home, are still read)",
    )
    aws: AwsSettings = Field(default_factory=AwsSettings)

    @model_validator(mode="before")
    @classmethod
    def _old_run_keys(cls, data: object) -> object:
        return move_old_run_keys(data) if isinstance(data, dict) else data

    @property
    def ledger_path(self) -> Path:
        return self.home / LEDGER_FILE

    @property
    def runs_dir(self) -> Path:
        return self.home / RUNS_FOLDER

    @property
    def config_path(self) -> Path:
        return self.home / CONFIG_FILE

    @property
    def data_path(self) -> Path:
        # a relative data_dir is relative to home; an absolute one replaces it
        return self.home / (self.data_dir.expanduser() if self.data_dir else "data")

    @property
    def cache_dir(self) -> Path:
        """Derived files that can be rebuilt: unpacked archives, decoded image caches."""
        return self.home / "cache"


def load_settings(home: Path | None = None) -> Settings:
    """Settings from SPOTRUN_HOME/config.toml (all keys optional)."""
    home = (home or default_home()).absolute()
    data: dict[str, object] = {}
    config_path = home / CONFIG_FILE
    if config_path.exists():
        try:
            data = tomllib.loads(config_path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"{config_path} is not UTF-8 text (byte {exc.start})", hint="save it as UTF-8"
            ) from exc
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"cannot read {config_path}: {exc}") from exc
        except (RecursionError, ValueError) as exc:
            raise UsageError(f"cannot read {config_path}: {unreadable_reason(exc)}") from exc
    if "home" in data:
        raise UsageError(
            f"{config_path}: 'home' cannot be set in the config file it lives in",
            hint=f"set {HOME_VAR} to choose another home",
        )
    if data.pop("heartbeat_timeout_s", None) is not None:  # gone: no timer ends a job now
        logging.getLogger(__name__).warning(
            "spotrun: %s: heartbeat_timeout_s no longer does anything (an instance keeps its "
            "job running while no controller is there; see run.no_progress_s); remove it",
            config_path,
        )
    try:
        moved = move_old_run_keys(data)
    except UsageError as exc:
        raise UsageError(f"{config_path}: {exc.message}", hint=exc.hint) from exc
    try:
        return Settings(home=home, **moved)
    except ValidationError as exc:
        why = old_spelling(describe_validation_error(exc, Settings), data)
        raise UsageError(f"{config_path}: {why}") from exc


class Resources(StrictModel):
    """What a job needs from an instance."""

    gpus: int = Field(0, ge=0, le=MAX_GPUS_PER_NODE, description="GPUs per node")
    gpu_model: str | None = Field(None, description="e.g. A100, H100, L4 (case-insensitive)")
    gpu_memory_gb: float | None = Field(None, gt=0, description="at least this much per GPU")
    instance_type: str | None = None
    region: str | None = None
    regions: list[str] = Field(
        default_factory=list,
        description="offers from each of these regions (--regions); region, when set, wins",
    )
    zone: str | None = None
    spot: bool = True
    disk_gb: int | None = Field(
        None, ge=8, le=MAX_DISK_GB, description="root volume; None = settings"
    )
    nodes: int = Field(1, ge=1, le=MAX_NODES)


class LaunchSpec(StrictModel):
    """Everything `launch` was asked for, resolved and validated; stored with the run."""

    recipe: str  # the recipe; for your own command, a label (the task's name, or "cmd")
    overrides: list[str] = Field(default_factory=list)
    resources: Resources = Field(default_factory=Resources)
    name: str | None = None
    cloud: CloudName = "local"
    # finite: `inf` or 1e400 is no cap, and a cap that is no cap is refused
    max_cost_usd: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_hours: float | None = Field(None, gt=0, le=MAX_HOURS, allow_inf_nan=False)
    # None: the settings' wait_for_capacity_s when the run asks (runs stored before it)
    wait_for_capacity_s: float | None = Field(None, ge=0, le=MAX_CAPACITY_WAIT_S)
    spot_policy: SpotPolicy = "spot"
    job: JobSpec | None = Field(None, description="what runs; None: the recipe, as stored before")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="a recipe's job environment: --env and the trackers' variables (your own "
        "command keeps its environment in job.envs)",
    )

    def job_spec(self) -> JobSpec:
        """The job this launch runs (runs recorded before jobs existed ran their recipe)."""
        return self.job if self.job is not None else JobSpec.for_recipe(self.recipe, self.overrides)

    @field_validator("name")
    @classmethod
    def _name_is_safe(cls, value: str | None) -> str | None:
        if value is not None and not NAME_PATTERN.fullmatch(value):
            raise ValueError(
                "a run name is 1-63 characters of a-z, 0-9, '-' and '_', starting with a "
                "letter or digit"
            )
        return value


def unreadable_reason(exc: RecursionError | ValueError) -> str:
    """Why Python's own parsers (json, tomllib, YAML) gave up on a file: they raise these on
    arrays nested thousands deep and on integers of thousands of digits, not their own error."""
    if isinstance(exc, RecursionError):
        return "values nested too deeply"
    return f"a number of more than {sys.get_int_max_str_digits()} digits"


def describe_validation_error(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line naming each bad key and what was expected of it; given the model, an unknown
    key comes with the known keys it is close to."""
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "value"
        if err["type"] == "extra_forbidden":
            parts.append(unknown_key(model, err["loc"]))
        else:
            parts.append(f"{key}: {err['msg']}")
    return "; ".join(parts)
