"""The controller's handle on a run's job: start, poll and stop it through a Runner.

The same calls drive the local cloud (LocalRunner) and instances (SSH), because each one runs
`spotrun agent ...` on the machine the job lives on and reads its JSON answer (the status poll,
asked every few seconds, is one shell command instead).
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from spotrun.core.errors import RemoteError
from spotrun.core.rundir import EXIT_FILE, JOB_ENV_FILE
from spotrun.remote.runner import Runner


@dataclass(frozen=True)
class JobStatus:
    alive: bool
    exit_code: int | None

    @property
    def finished(self) -> bool:
        return self.exit_code is not None

    @property
    def lost(self) -> bool:
        """The session is gone and never wrote an exit code (killed, or its machine died)."""
        return not self.alive and self.exit_code is None


class JobDriver:
    def __init__(self, runner: Runner, spotrun_argv: list[str], run_dir: str, session: str) -> None:
        self.runner = runner
        self.spotrun_argv = spotrun_argv
        self.run_dir = run_dir
        self.session = session

    def _agent(self, op: str, *args: str, timeout_s: float = 60.0) -> dict[str, object]:
        argv = [
            *self.spotrun_argv,
            "agent",
            op,
            "--session",
            self.session,
            "--run-dir",
            self.run_dir,
        ]
        command = shlex.join([*argv, *args])
        result = self.runner.run(command, timeout_s=timeout_s).check(f"spotrun agent {op}")
        try:
            answer = json.loads(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError) as exc:
            raise RemoteError(
                f"spotrun agent {op} gave no answer: {result.stdout[-300:]!r}"
            ) from exc
        if not isinstance(answer, dict):
            raise RemoteError(f"spotrun agent {op} answered {answer!r}")
        return answer

    def start(
        self, argv: list[str], env: dict[str, str], wrap_options: list[str] | None = None
    ) -> bool:
        """Start the job in its tmux session unless it already runs; True if it was started.

        `wrap_options` go to the wrapper: --cwd=DIR, --setup=SCRIPT, --checkpoint-dir=DIR.
        `env` travels in JOB_ENV_FILE (0600), read by the wrapper; it is on no command line."""
        env_path = self.put_env(env)
        wrap_args = [f"--wrap={option}" for option in wrap_options or []]
        answer = self._agent("start", f"--env-file={env_path}", *wrap_args, "--", *argv)
        return bool(answer.get("started"))

    def put_env(self, env: dict[str, str]) -> str:
        """Write `env` to the run folder's JOB_ENV_FILE, made 0600 before a byte of it is there."""
        remote = posixpath.join(self.run_dir, JOB_ENV_FILE)
        self.runner.run(
            f"umask 077 && mkdir -p {shlex.quote(self.run_dir)} && : > {shlex.quote(remote)} "
            f"&& chmod 600 {shlex.quote(remote)}",
            timeout_s=60,
        ).check("preparing the job's environment file")
        with tempfile.TemporaryDirectory(prefix="spotrun-env-") as scratch:
            local = Path(scratch) / JOB_ENV_FILE
            fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump({key: str(value) for key, value in env.items()}, fh)
            self.runner.put(local, remote)
        return remote

    def exec(self, command: str) -> str:
        """Run `command` in a new window of the job's session; returns the window's name."""
        answer = self._agent("exec", f"--command={command}")
        if "error" in answer:
            raise RemoteError(str(answer["error"]))
        return str(answer["window"])

    def exec_status(self, window: str) -> tuple[int | None, str]:
        """The exec window's exit code (None while it runs) and its output so far."""
        answer = self._agent("exec-status", f"--window={window}")
        if "error" in answer:
            raise RemoteError(str(answer["error"]))
        code = answer.get("exit_code")
        return (code if isinstance(code, int) else None), str(answer.get("output", ""))

    def status(self) -> JobStatus:
        """Is the session alive, and the exit code the wrapper wrote, in one shell command.

        The controller asks this every few seconds of every run, so it starts no Python on the
        instance (`spotrun agent status` costs ~80 ms of CPU there each time); a run synced
        over SSH has it asked with its files (spotrun.remote.probe)."""
        command = status_shell(self.run_dir, self.session)
        out = self.runner.run(command, timeout_s=60.0).check("asking for the job's status")
        session, _, rest = out.stdout.partition("\0")
        return parse_status(session, rest.partition("\0")[0], said=out.stdout)

    def stop(self, grace_s: float = 15.0) -> JobStatus:
        answer = self._agent("stop", f"--grace={grace_s}", timeout_s=grace_s + 30)
        code = answer.get("exit_code")
        return JobStatus(
            alive=bool(answer.get("alive")), exit_code=code if isinstance(code, int) else None
        )


def status_shell(run_dir: str, session: str) -> str:
    """A shell command that prints two NUL-ended fields: `session=N` (tmux has-session's exit
    status, 0 while the session lives) and EXIT_FILE's text (any NUL in it dropped).

    The session is asked first: the wrapper writes EXIT_FILE before its session ends, so a
    session found gone has its exit code on disk already."""
    socket = '"${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/default"'
    exit_path = shlex.quote(posixpath.join(run_dir, EXIT_FILE))
    return (
        f"tmux -S {socket} has-session -t {shlex.quote('=' + session)} 2>/dev/null; "
        f"printf 'session=%d\\0' $?; [ -f {exit_path} ] && tr -d '\\000' < {exit_path}; "
        "printf '\\0'"
    )


def parse_status(session: str, exit_json: str, *, said: str) -> JobStatus:
    """The JobStatus in status_shell's two fields; `said`: the whole answer, for the error."""
    if not session.startswith("session="):
        raise RemoteError(f"the job's status gave no answer: {said[-300:]!r}")
    return JobStatus(alive=session == "session=0", exit_code=_exit_code(exit_json))


def _exit_code(exit_json: str) -> int | None:
    """The exit code in the wrapper's EXIT_FILE text; None when there is none (yet)."""
    try:
        data = json.loads(exit_json)
    except ValueError:
        return None
    code = data.get("exit_code") if isinstance(data, dict) else None
    return code if isinstance(code, int) else None
