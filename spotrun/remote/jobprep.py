"""Get an instance ready for your own command, and bring its results back.

On the instance (any Runner: SSH, or this machine for the local cloud) the run folder holds

    workdir/        your workdir as pushed (the job runs here); outputs are read from it
    setup.sh        the setup command, run once per instance by the wrapper (setup.log)
    checkpoints/    SPOTRUN_CHECKPOINT_DIR (or what your checkpoint_dir links to): synced
                    back, uploaded to the durable store, restored on a replacement instance

Outputs come back to the same place on this machine: runs/<id>/workdir/<output>.
"""

from __future__ import annotations

import posixpath
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from spotrun.core.jobspec import JobSpec
from spotrun.core.rundir import (
    CHECKPOINT_DIR_VAR,
    CHECKPOINT_RESTORE_DIR,
    CHECKPOINTS_DIR,
    NUM_GPUS_VAR,
    RUN_DIR_VAR,
    RUN_ID_VAR,
    SETUP_LOG_FILE,
    SETUP_SCRIPT_FILE,
    WORKDIR_DIR,
)
from spotrun.core.terminal_text import printable
from spotrun.jobs.workdir import WorkFile, list_files
from spotrun.remote.push import push_workdir
from spotrun.remote.runner import Runner
from spotrun.remote.sync import pull_paths

# torchrun's rendezvous on one node: the node variables a single-node job gets.
MASTER_PORT = 29500


@dataclass(frozen=True)
class PreparedJob:
    argv: list[str]
    env: dict[str, str]
    wrap_options: list[str]
    notes: list[str] = field(default_factory=list)  # what happened, for the run's events


def job_env(run_id: str, run_dir: str, checkpoint_dir: str, gpus: int) -> dict[str, str]:
    """What spotrun tells the job (SPOTRUN_*, and the node variables torchrun reads)."""
    return {
        RUN_ID_VAR: run_id,
        RUN_DIR_VAR: run_dir,
        CHECKPOINT_DIR_VAR: checkpoint_dir,
        NUM_GPUS_VAR: str(gpus),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(MASTER_PORT),
        "NODE_RANK": "0",
        "NNODES": "1",
        "PYTHONUNBUFFERED": "1",
    }


def prepare_job(
    runner: Runner, job: JobSpec, run_id: str, run_dir: str, gpus: int, spotrun_argv: list[str]
) -> PreparedJob:
    """Push the workdir and the setup script; the job's argv, environment and wrapper options."""
    cwd = posixpath.join(run_dir, WORKDIR_DIR)
    notes = []  # (the agent makes `cwd` when it starts the job: no round trip for it here)
    if job.workdir is not None:
        root = Path(job.workdir)
        pushed = push_workdir(runner, root, list_files(root), run_dir, cwd)
        notes.append(pushed.describe())
    options = [f"--cwd={cwd}"]
    if job.setup is not None:
        with tempfile.TemporaryDirectory(prefix="spotrun-setup-") as scratch:
            script = Path(scratch) / SETUP_SCRIPT_FILE
            script.write_text("set -e\n" + job.setup + "\n")
            runner.put(script, posixpath.join(run_dir, SETUP_SCRIPT_FILE))
        options.append(f"--setup={posixpath.join(run_dir, SETUP_SCRIPT_FILE)}")
    checkpoint_dir = job.checkpoint_path(run_dir, cwd)
    options.append(f"--checkpoint-dir={checkpoint_dir}")
    if job.data is not None:  # staged (or mounted) by the wrapper before the job starts
        options.append(f"--data={job.data}")
    env = {**job_env(run_id, run_dir, checkpoint_dir, gpus), **job.envs}
    return PreparedJob(job.command(spotrun_argv, run_dir), env, options, notes)


def restore_checkpoints(runner: Runner, local_run_dir: Path, run_dir: str) -> int:
    """Put the run's checkpoints back on a fresh instance (a replacement): returns files sent.

    Only when the instance has none: on the instance that wrote them they are already there,
    and newer than ours."""
    local = local_run_dir / CHECKPOINTS_DIR
    files = [
        WorkFile(p.relative_to(local).as_posix(), p.stat().st_size, int(p.stat().st_mtime), False)
        for p in sorted(local.rglob("*"))
        if p.is_file() and not p.is_symlink() and not p.name.endswith((".tmp", ".part"))
    ]
    if not files:
        return 0
    remote = posixpath.join(run_dir, CHECKPOINTS_DIR)
    probe = runner.run(f"ls -A {shlex.quote(remote)} 2>/dev/null | head -1", timeout_s=60).check(
        "looking for checkpoints on the instance"
    )
    if probe.stdout.strip():
        return 0
    state = posixpath.join(run_dir, CHECKPOINT_RESTORE_DIR)
    return len(push_workdir(runner, local, files, state, remote).sent)


def pull_outputs(runner: Runner, job: JobSpec, run_dir: str, local_run_dir: Path) -> list[str]:
    """Bring the job's outputs (new or changed files only) to runs/<id>/workdir/."""
    if not job.outputs:
        return []
    cwd = posixpath.join(run_dir, WORKDIR_DIR)
    return pull_paths(runner, cwd, job.outputs, local_run_dir, WORKDIR_DIR).fetched


def setup_failure(local_run_dir: Path, code: int, lines: int = 5) -> str:
    """The failed run's message when its setup failed: the code and the setup's last lines."""
    try:
        text = (local_run_dir / SETUP_LOG_FILE).read_text(errors="replace")
    except OSError:
        text = ""
    kept = [printable(line).strip() for line in text.splitlines() if printable(line).strip()]
    kept = kept[-lines:]
    what = f"setup failed with exit code {code}"
    return f"{what}: {' | '.join(kept)}" if kept else what
