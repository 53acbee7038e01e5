"""Launching your own command: `--cmd ...` or a task file, checked before anything exists.

Everything here runs before a run is recorded: a missing or too large workdir, a bad task
file, an empty command or a bad `--env` is a UsageError and nothing is launched.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from spotrun.core.config import NAME_PATTERN, describe_validation_error
from spotrun.core.errors import UsageError
from spotrun.core.jobspec import ENV_NAME, JobSpec
from spotrun.core.rundir import RESERVED_VAR_PREFIX
from spotrun.jobs.taskfile import TaskFile
from spotrun.jobs.workdir import check_size, list_files, resolve_workdir

DEFAULT_LABEL = "cmd"


def parse_envs(items: list[str]) -> dict[str, str]:
    """`--env KEY=VALUE` flags as a dict (a later KEY wins)."""
    envs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not ENV_NAME.fullmatch(key):
            raise UsageError(
                f"--env '{item}' is not KEY=VALUE with a variable name as KEY",
                hint="e.g. --env LR=0.1",
            )
        if key.startswith(RESERVED_VAR_PREFIX):
            raise UsageError(f"--env {key}: SPOTRUN_* variables are set by spotrun itself")
        envs[key] = value
    return envs


def read_env_file(path: str) -> dict[str, str]:
    """An `--env-file`: one KEY=VALUE per line (blank lines and `#` comments skipped; the value
    is everything after the first `=`, unquoted), as Docker's --env-file reads them."""
    try:
        text = Path(path).expanduser().read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"--env-file {path}: cannot read it ({exc})", hint="give a text file of KEY=VALUE lines"
        ) from exc
    envs: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        key = key.strip()
        if not sep or not ENV_NAME.fullmatch(key):
            raise UsageError(
                f"--env-file {path}, line {number}: not KEY=VALUE with a variable name as KEY",
                hint="e.g. WANDB_PROJECT=my-project",
            )
        if key.startswith(RESERVED_VAR_PREFIX):
            raise UsageError(
                f"--env-file {path}, line {number}: SPOTRUN_* variables are set by spotrun itself"
            )
        envs[key] = value
    return envs


def build_job(
    run: str | None,
    *,
    workdir: str | None = None,
    setup: str | None = None,
    envs: dict[str, str] | None = None,
    outputs: list[str] | None = None,
    checkpoint_dir: str | None = None,
    data: str | None = None,
    workdir_max_mb: float,
) -> JobSpec:
    """The job to store with the run; its workdir checked (exists, under the size limit)."""
    if run is None or not run.strip():
        raise UsageError(
            "the run command is empty: nothing to run",
            hint='give one, e.g. --cmd "python train.py"',
        )
    folder = None
    if workdir is not None:
        root = resolve_workdir(workdir)
        check_size(root, list_files(root), workdir_max_mb)
        folder = str(root)
    try:
        return JobSpec(
            run=run,
            workdir=folder,
            setup=setup,
            envs=envs or {},
            outputs=outputs or [],
            checkpoint_dir=checkpoint_dir,
            data=data,
        )
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc)) from exc


def task_label(name: str | None) -> str:
    """What the run is listed as (its RECIPE column, and its default name's first part)."""
    if name is None:
        return DEFAULT_LABEL
    if not NAME_PATTERN.fullmatch(name):
        raise UsageError(
            f"task name '{name}' must be 1-63 characters of a-z, 0-9, '-' and '_', starting "
            "with a letter or digit"
        )
    return name


def task_job(task: TaskFile, *, envs: dict[str, str], workdir_max_mb: float) -> JobSpec:
    """The job of a task file; `envs` (from --env) add to and override the file's."""
    return build_job(
        task.run,
        workdir=task.workdir,
        setup=task.setup,
        envs={**task.env_strings(), **envs},
        outputs=task.outputs,
        checkpoint_dir=task.checkpoint_dir,
        data=task.data,
        workdir_max_mb=workdir_max_mb,
    )
