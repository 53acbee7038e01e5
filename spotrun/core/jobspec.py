"""What a run runs: a built-in recipe, or your own command with its files and environment.

A JobSpec is stored with the run (inside its LaunchSpec), so a supervisor that restarts, or a
replacement instance after a spot interruption, starts exactly the same job again. A recipe is a
shortcut: its JobSpec names the recipe and its overrides, and the command (`spotrun train ...`)
is built on the instance that runs it.

Paths in a JobSpec: `workdir` is absolute on this machine (resolved at launch); `outputs` and
`checkpoint_dir` are relative to the folder the job runs in (checkpoint_dir None: the run
folder's `checkpoints/`, where recipes checkpoint).
"""

from __future__ import annotations

import posixpath
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from spotrun.core.rundir import CHECKPOINTS_DIR, RESERVED_VAR_PREFIX

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHELL = "bash"


class JobModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class RecipeCall(JobModel):
    """A built-in recipe and its `--set` overrides."""

    name: str = Field(min_length=1)
    overrides: list[str] = Field(default_factory=list)


class JobSpec(JobModel):
    """One job: exactly one of `recipe`, `run` (a bash command) or `argv` (no shell)."""

    recipe: RecipeCall | None = None
    run: str | None = Field(None, description="a bash command or script")
    argv: list[str] | None = Field(None, description="a program and its arguments, no shell")
    workdir: str | None = Field(None, description="absolute folder on this machine to ship")
    setup: str | None = Field(None, description="bash run once per instance before the job")
    envs: dict[str, str] = Field(default_factory=dict)
    outputs: list[str] = Field(default_factory=list, description="paths to pull back")
    checkpoint_dir: str | None = None
    # s3://..., snapshot:snap-... (staged or mounted on the instance before the job starts) or
    # an absolute path (local cloud); the job finds it in SPOTRUN_DATA_DIR
    data: str | None = None

    @classmethod
    def for_recipe(
        cls, name: str, overrides: list[str] | None = None, envs: dict[str, str] | None = None
    ) -> JobSpec:
        return cls(recipe=RecipeCall(name=name, overrides=list(overrides or [])), envs=envs or {})

    @field_validator("run", "setup", "data")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value if value is None or value.strip() else None

    @field_validator("envs")
    @classmethod
    def _env_names(cls, envs: dict[str, str]) -> dict[str, str]:
        for key in envs:
            if not ENV_NAME.fullmatch(key):
                raise ValueError(
                    f"'{key}' is not a valid environment variable name "
                    "(letters, digits and '_', not starting with a digit)"
                )
            if key.startswith(RESERVED_VAR_PREFIX):
                raise ValueError(f"{key}: SPOTRUN_* variables are set by spotrun itself")
        return envs

    @field_validator("outputs")
    @classmethod
    def _outputs_inside(cls, outputs: list[str]) -> list[str]:
        cleaned = []
        for path in outputs:
            norm = posixpath.normpath(path.strip()) if path.strip() else ""
            if not norm or norm == "." or norm.startswith("/") or norm.split("/")[0] == "..":
                raise ValueError(
                    f"output '{path}' must be a path inside the job's folder "
                    "(relative, without '..')"
                )
            cleaned.append(norm)
        return cleaned

    @field_validator("checkpoint_dir")
    @classmethod
    def _checkpoint_dir(cls, value: str | None) -> str | None:
        # Inside the job's folder: it becomes a link into the run folder there, and a folder of
        # yours elsewhere (on the local cloud, this machine's) is never replaced by one.
        if value is None or not value.strip():
            return None
        norm = posixpath.normpath(value.strip())
        if norm == "." or norm.startswith("/") or norm.split("/")[0] == "..":
            raise ValueError(
                f"checkpoint_dir '{value}' must be a folder inside the workdir "
                "(relative, without '..')"
            )
        return norm

    @model_validator(mode="after")
    def _one_thing_runs(self) -> JobSpec:
        given = [k for k in ("recipe", "run", "argv") if getattr(self, k) is not None]
        if not given:
            raise ValueError("the job has nothing to run: give a command (run) or a recipe")
        if len(given) > 1:
            raise ValueError(f"a job runs one thing; got {' and '.join(given)}")
        if self.argv is not None and (not self.argv or not self.argv[0].strip()):
            raise ValueError("argv is empty: nothing to run")
        if self.recipe is not None:
            extra = [k for k in ("workdir", "setup", "checkpoint_dir", "data") if getattr(self, k)]
            extra += ["outputs"] if self.outputs else []
            if extra:
                raise ValueError(
                    f"{', '.join(extra)}: only for your own command; a recipe runs spotrun's "
                    "trainer, which keeps everything in the run folder"
                )
        return self

    @property
    def is_recipe(self) -> bool:
        return self.recipe is not None

    def label(self) -> str:
        """What `spotrun ls` shows in its RECIPE column when the launch gave no task name."""
        return self.recipe.name if self.recipe is not None else "cmd"

    def command(self, spotrun_argv: list[str], run_dir: str) -> list[str]:
        """The job's argv on the machine that runs it (`spotrun_argv` runs spotrun there)."""
        if self.recipe is not None:
            argv = [*spotrun_argv, "train", self.recipe.name, "--run-dir", run_dir]
            for item in self.recipe.overrides:
                argv += ["--set", item]
            return argv
        if self.argv is not None:
            return list(self.argv)
        assert self.run is not None
        return [SHELL, "-c", self.run]

    def checkpoint_path(self, run_dir: str, cwd: str) -> str:
        """The job's checkpoint folder on the machine that runs it, as an absolute path."""
        if self.checkpoint_dir is None:
            return posixpath.join(run_dir, CHECKPOINTS_DIR)
        return posixpath.normpath(posixpath.join(cwd, self.checkpoint_dir))
