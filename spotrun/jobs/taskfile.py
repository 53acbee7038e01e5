"""Task files: your own job described in YAML, as `spotrun launch TASK.yaml` takes it.

    name: my-train
    resources: {gpus: 1, gpu_model: A10G, spot: true, disk_gb: 100}
    workdir: .                       # relative to the task file's folder
    setup: pip install -r requirements.txt
    run: python train.py --epochs 10
    envs: {LR: "0.1"}
    outputs: [results/, model.pt]    # in the workdir; pulled back to runs/<id>/workdir/
    checkpoint_dir: ckpt             # SPOTRUN_CHECKPOINT_DIR: synced, restored on a replacement
    data: s3://bucket/imagenet       # or snapshot:snap-..., or a folder (local cloud); staged
                                     # or mounted before `run`; the job reads SPOTRUN_DATA_DIR
    max_cost: 5.0                    # USD
    max_hours: 2

Every key is checked before anything is launched; an unknown key is refused by name.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spotrun.core.config import (
    MAX_DISK_GB,
    MAX_GPUS_PER_NODE,
    MAX_NODES,
    unreadable_reason,
)
from spotrun.core.durations import MAX_HOURS
from spotrun.core.errors import UsageError
from spotrun.core.suggest import unknown_key
from spotrun.datasets.spec import is_remote, parse_data


class TaskModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskResources(TaskModel):
    gpus: int | None = Field(None, ge=0, le=MAX_GPUS_PER_NODE)
    gpu_model: str | None = None
    instance_type: str | None = None
    region: str | None = None
    spot: bool = True
    disk_gb: int | None = Field(None, ge=8, le=MAX_DISK_GB)
    nodes: int | None = Field(
        None, ge=1, le=MAX_NODES, description="instances run together (torchrun)"
    )

    def as_flags(self) -> dict[str, object]:
        """The keys that were given, in Resources' vocabulary."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class TaskFile(TaskModel):
    name: str | None = None
    resources: TaskResources = Field(default_factory=TaskResources)
    workdir: str | None = None
    setup: str | None = None
    run: str
    envs: dict[str, str | int | float | bool] = Field(default_factory=dict)
    outputs: list[str] = Field(default_factory=list)
    checkpoint_dir: str | None = None
    data: str | None = None
    max_cost: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_hours: float | None = Field(None, gt=0, le=MAX_HOURS, allow_inf_nan=False)

    @field_validator("run")
    @classmethod
    def _run_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the run command is empty")
        return value

    def env_strings(self) -> dict[str, str]:
        """envs as the process sees them (YAML's 1 and true become '1' and 'true')."""
        return {
            k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in self.envs.items()
        }


def describe_task_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "the file"
        if err["type"] == "extra_forbidden":
            parts.append(unknown_key(TaskFile, err["loc"]))
        elif err["type"] == "missing":
            parts.append(f"'{key}' is required")
        else:
            parts.append(f"{key}: {err['msg']}")
    return "; ".join(parts)


def is_task_file(arg: str) -> bool:
    return arg.endswith((".yaml", ".yml")) or Path(arg).is_file()


def load_task(path: Path) -> TaskFile:
    """The task file at `path`, validated; its workdir made absolute (relative to the file)."""
    import yaml  # ~8 ms: only a task file launch reads YAML, and every launch loads this module

    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"task file {path} is not UTF-8 text (byte {exc.start})", hint="save it as UTF-8"
        ) from exc
    except OSError as exc:
        raise UsageError(f"cannot read task file {path}: {exc.strerror or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"task file {path} is not valid YAML: {exc}") from exc
    except (RecursionError, ValueError) as exc:
        raise UsageError(f"cannot read task file {path}: {unreadable_reason(exc)}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"task file {path} must be a mapping of keys (name, run, ...)")
    try:
        task = TaskFile.model_validate(data)
    except ValidationError as exc:
        raise UsageError(
            f"task file {path}: {describe_task_error(exc)}",
            hint="keys: name, resources (gpus, gpu_model, instance_type, region, spot, disk_gb), "
            "workdir, setup, run, envs, outputs, checkpoint_dir, data, max_cost, max_hours",
        ) from exc
    if task.workdir is not None and not Path(task.workdir).expanduser().is_absolute():
        task = task.model_copy(update={"workdir": str((path.parent / task.workdir).absolute())})
    if task.data is not None:
        task = task.model_copy(update={"data": resolve_task_data(task.data, path.parent)})
    return task


def resolve_task_data(text: str, folder: Path) -> str | None:
    """A task's `data`: s3:// and snapshot: values checked for form (UsageError), a local path
    made absolute relative to the task file's folder (its existence is checked at launch)."""
    text = text.strip()
    if not text:
        return None
    if is_remote(text):
        return parse_data(text).uri
    local = Path(text).expanduser()
    return str(local if local.is_absolute() else (folder / local).absolute())
