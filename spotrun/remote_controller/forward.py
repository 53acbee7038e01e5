"""Run commands carried out by a controller on another host (SPOTRUN_HOME/remote.json).

`spotrun ls`, `launch`, `sweep ...` and the other run commands run as `spotrun ARGS` on the
controller host, over the system ssh (a terminal when this one is a terminal, so `attach` and
Ctrl-C work there), streaming its output and returning its exit code. Files on this machine
that a command names travel first: a launch's task file and workdir go to a staging folder on
the host and the arguments are rewritten to name them there. What cannot travel (a local data
folder, a plot file to write here) is refused, never silently replaced by something else.

Only the standard library at import: every forwarded `ls` reads this module.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from spotrun.core.errors import SpotrunError, UsageError
from spotrun.core.lazy import lazy_module
from spotrun.core.rundir import METRICS_FILE
from spotrun.remote_controller.connection import ensure_shared_connection, ssh_argv
from spotrun.remote_controller.record import ControllerHost, load_record
from spotrun.service.tracker_env import tracker_env

if TYPE_CHECKING:
    from spotrun.jobs import own_command, taskfile
    from spotrun.jobs import workdir as workdir_files
    from spotrun.remote_controller import ssh_binary
else:
    # a forwarded `ls` imports none of these: staging files and completion need the runner
    # (~3 ms), a workdir tarfile and gzip (~3 ms), a task file or --env pydantic (~0.1 s)
    ssh_binary = lazy_module("spotrun.remote_controller.ssh_binary")
    workdir_files = lazy_module("spotrun.jobs.workdir")
    taskfile = lazy_module("spotrun.jobs.taskfile")
    own_command = lazy_module("spotrun.jobs.own_command")

# The commands the controller's host carries out (the run commands); the others (recipes,
# prices, methods, data, train, doctor, completion, controller, pull) run here.
FORWARDED = frozenset(
    {
        "launch",
        "sweep",
        "ls",
        "status",
        "logs",
        "attach",
        "exec",
        "stop",
        "cost",
        "resume",
        "rm",
        "gc",
        "ssh",
    }
)
# Run commands that read or write files of this machine that the host cannot see.
NOT_CARRIED = {
    "plot": "`spotrun plot` reads the run folders, which live on the controller host: bring a "
    f"run here with `spotrun pull RUN` and plot its {METRICS_FILE}, or run it there",
    "sample": "`spotrun sample` reads a checkpoint: `spotrun pull RUN`, then "
    "`spotrun sample PULLED_FOLDER`",
}
HELP = frozenset({"-h", "--help"})
Log = Callable[[str], None]


def wants_forwarding(args: list[str]) -> bool:
    """Whether `spotrun ARGS` is a run command (help stays here: it is the same help)."""
    return bool(args) and args[0] in FORWARDED and not HELP & set(args[1:])


def refusal(args: list[str]) -> str | None:
    """Why `spotrun ARGS` cannot go to the controller host, or None."""
    if args and args[0] in NOT_CARRIED and not HELP & set(args[1:]):
        return NOT_CARRIED[args[0]]
    for i, word in enumerate(args):
        if word == "--plot" or word.startswith("--plot="):
            return (
                "--plot writes its image on the controller host, not here: run the command "
                "without --plot (the figures' data: `spotrun cost --json`, `spotrun pull RUN`)"
            )
        if word == "--set" and i + 1 < len(args):
            refused = _local_data(args[i + 1])
            if refused:
                return refused
        elif word.startswith("--set="):
            refused = _local_data(word.removeprefix("--set="))
            if refused:
                return refused
    return None


def _local_data(assignment: str) -> str | None:
    key, _, value = assignment.partition("=")
    remote = "://" in value or value.startswith("snapshot:")
    if key.strip() != "data" or not value or remote or not Path(value).expanduser().exists():
        return None
    return (
        f"--set data={value} names a folder of this machine, which the controller host "
        "cannot read: push it with `spotrun data push FOLDER s3://BUCKET/NAME` and use "
        "--set data=s3://BUCKET/NAME"
    )


# ---------------------------------------------------------------------- staging
def _split(args: list[str], valued: Collection[str]) -> list[list[str]]:
    """The arguments as units: [option, value], [flag] or [positional]."""
    units: list[list[str]] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            units += [[w] for w in args[i:]]
            break
        if word in valued and i + 1 < len(args):
            units.append([word, args[i + 1]])
            i += 2
            continue
        if word.startswith("--") and "=" in word and word.split("=", 1)[0] in valued:
            units.append(word.split("=", 1))
            i += 1
            continue
        units.append([word])
        i += 1
    return units


class Stager:
    """Files of this machine put in one staging folder on the host, on first need."""

    def __init__(self, home: Path, record: ControllerHost, log: Log) -> None:
        self.home = home
        self.record = record
        self.log = log
        self.folder = (
            f"{record.home}/staging/{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        )
        self._runner: ssh_binary.SshBinaryRunner | None = None

    def runner(self) -> ssh_binary.SshBinaryRunner:
        if self._runner is None:
            self._runner = ssh_binary.SshBinaryRunner(self.home, self.record)
        return self._runner

    def file(self, path: Path, *, name: str | None = None, private: bool = False) -> str:
        runner = self.runner()
        remote = f"{self.folder}/{name or path.name}"
        runner.put(path, remote, private=private)
        return remote

    def workdir(self, folder: str, limit_mb: float) -> str:
        root = workdir_files.resolve_workdir(folder)
        files = workdir_files.list_files(root)
        total = workdir_files.check_size(root, files, limit_mb)
        self.log(f"sending workdir {root} ({len(files)} files, {total / 1e6:.1f} MB) to the host")
        runner = self.runner()
        remote = f"{self.folder}/workdir"
        with tempfile.TemporaryDirectory(prefix="spotrun-stage-") as tmp:
            archive = Path(tmp) / "workdir.tar.gz"
            workdir_files.write_archive(root, files, archive)
            runner.put(archive, f"{self.folder}/workdir.tar.gz")
        q = shlex.quote
        runner.run(
            f"mkdir -p {q(remote)} && tar -xzf {q(self.folder + '/workdir.tar.gz')} -C {q(remote)}"
            f" && rm -f {q(self.folder + '/workdir.tar.gz')}",
            timeout_s=600,
        ).check("unpacking the workdir on the controller host")
        return remote


def stage_launch(
    home: Path,
    record: ControllerHost,
    args: list[str],
    valued: Collection[str],
    *,
    workdir_max_mb: float,
    log: Log,
) -> list[str]:
    """`launch`'s arguments with its task file and workdir put on the host and renamed."""
    units = _split(args[1:], valued)
    stager = Stager(home, record, log)
    positional = next((u for u in units if len(u) == 1 and not u[0].startswith("-")), None)
    workdir = next((u for u in units if u[0] == "--workdir" and len(u) == 2), None)
    task_workdir: str | None = None
    is_task = positional is not None and taskfile.is_task_file(positional[0])
    if positional is not None and is_task and Path(positional[0]).is_file():
        task_path = Path(positional[0])
        # checked here: a bad file is refused before anything moves
        task = taskfile.load_task(task_path)
        if (
            task.data is not None
            and "://" not in task.data
            and not task.data.startswith("snapshot:")
        ):
            raise UsageError(
                f"task file {task_path}: data {task.data} is a folder of this machine, which "
                "the controller host cannot read",
                hint="push it with `spotrun data push FOLDER s3://BUCKET/NAME` and name that",
            )
        task_workdir = task.workdir
        positional[0] = stager.file(task_path)
    if workdir is not None:
        workdir[1] = stager.workdir(workdir[1], workdir_max_mb)
    elif task_workdir is not None:
        units.append(["--workdir", stager.workdir(task_workdir, workdir_max_mb)])
    return [args[0], *(word for unit in units for word in unit)]


def stage_job_env(
    home: Path, record: ControllerHost, args: list[str], valued: Collection[str], *, log: Log
) -> list[str]:
    """`launch`'s or `sweep`'s arguments with the job environment of this machine put on the
    host: each --env-file travels, the trackers' variables of this shell (W&B, MLflow), which
    the host's shell does not have, travel as one more --env-file ahead of them, and the
    --env values as one after them (so the host applies them in the same order: trackers,
    files, --env). All are 0600 files in the staging folder: a variable's value never
    appears on a command line there, nor in this machine's ssh command."""
    units = _split(args[1:], valued)
    end = next((i for i, unit in enumerate(units) if unit == ["--"]), len(units))
    flags = [unit[1] for unit in units[:end] if unit[0] == "--env" and len(unit) == 2]
    units = [u for i, u in enumerate(units) if i >= end or not (u[0] == "--env" and len(u) == 2)]
    stager = Stager(home, record, log)
    for index, unit in enumerate(units):
        if unit[0] == "--env-file" and len(unit) == 2:
            path = Path(unit[1]).expanduser()
            if not path.is_file():
                raise UsageError(
                    f"--env-file {unit[1]}: no such file here",
                    hint="give a text file of KEY=VALUE lines on this machine",
                )
            unit[1] = stager.file(path, name=f"env-{index}", private=True)
    carried = {k: v for k, v in tracker_env(os.environ).items() if "\n" not in v}
    for key in sorted(set(tracker_env(os.environ)) - set(carried)):
        log(f"not carrying {key}: its value spans lines (give it with --env-file on the host)")
    if carried:  # names only: values such as WANDB_API_KEY are never printed
        log(f"carrying {', '.join(carried)} into the job's environment")
        staged = ["--env-file", _stage_values(stager, "trackers.env", carried)]
        # ahead of the first --env-file (the user's files win over the shell's trackers),
        # else before a `--` (what follows it is the job's, not spotrun's), else last: never
        # ahead of a subcommand such as `sweep run`
        first_file = next((i for i, unit in enumerate(units) if unit[0] == "--env-file"), None)
        end = next((i for i, unit in enumerate(units) if unit == ["--"]), len(units))
        units.insert(end if first_file is None else first_file, staged)
    if flags:
        values = _flag_values(flags)
        end = next((i for i, unit in enumerate(units) if unit == ["--"]), len(units))
        units.insert(end, ["--env-file", _stage_values(stager, "env-flags.env", values)])
    return [args[0], *(word for unit in units for word in unit)]


def _flag_values(flags: list[str]) -> dict[str, str]:
    """The --env KEY=VALUE flags, checked here as the host would check them (a bad one is
    refused before anything moves); a value of several lines cannot be one line of a file."""
    values = own_command.parse_envs(flags)
    for key, value in values.items():
        if "\n" in value or "\r" in value:
            raise UsageError(
                f"--env {key}: its value spans lines, which cannot travel to the controller host",
                hint="give a one-line value, or set the variable in a file on the host "
                "and name it with --env-file there",
            )
    return values


def _stage_values(stager: Stager, name: str, values: dict[str, str]) -> str:
    """`values` as KEY=VALUE lines in a 0600 file of the staging folder; its path there."""
    with tempfile.TemporaryDirectory(prefix="spotrun-env-") as tmp:
        local = Path(tmp) / name
        fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.writelines(f"{key}={value}\n" for key, value in values.items())
        return stager.file(local, private=True)


# -------------------------------------------------------------------- forwarding
def forward(home: Path, record: ControllerHost, args: list[str]) -> int:
    """Run `spotrun ARGS` on the controller host; its exit code (ssh's 255: unreachable)."""
    ensure_shared_connection(home, record)
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    argv = ssh_argv(home, record, record.spotrun_command(args), tty=tty)
    sys.stdout.flush()
    sys.stderr.flush()
    # Ctrl-C is the remote command's (through the terminal) or ssh's own: not ours to die of.
    # A handler, not SIG_IGN: ssh must not inherit an ignored SIGINT.
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: None)
    try:
        proc = subprocess.Popen(argv, env={k: v for k, v in os.environ.items() if k != "TMUX"})
        code = proc.wait()
    except OSError as exc:
        raise UsageError(f"cannot run ssh: {exc}", hint="install OpenSSH's client") from exc
    finally:
        signal.signal(signal.SIGINT, previous)
    return code


# -------------------------------------------------------------------- completion
def remote_refs(home: Path, table: str, incomplete: str) -> list[tuple[str, str]]:
    """(name or id, state) of the host's runs or sweeps starting with `incomplete`, for a
    Tab press; nothing when the host does not answer (completion never prints an error)."""
    args = ["ls", "--all", "--json"] if table == "runs" else ["sweep", "ls", "--json"]
    try:
        record = load_record(home)
        if record is None:
            return []
        runner = ssh_binary.SshBinaryRunner(home, record)
        result = runner.run(record.spotrun_command(args), timeout_s=10)
        rows = json.loads(result.stdout) if result.ok else []
    except (SpotrunError, ValueError):
        return []
    found: list[tuple[str, str]] = []
    for row in rows:
        if str(row.get("name", "")).startswith(incomplete):
            found.append((str(row["name"]), str(row.get("state", ""))))
        elif str(row.get("id", "")).startswith(incomplete):
            found.append((str(row["id"]), str(row.get("state", ""))))
    return found
