"""A Runner for this machine: shell commands through bash, files by copy."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import AnyStr

from spotrun.remote.runner import BytesResult, CommandResult

_TIMED_OUT = "\n(timed out)"


class LocalRunner:
    def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult:
        # Decoded as the SSH runner decodes (undecodable bytes replaced, newlines as written),
        # so a command answers the same text on either.
        answer = _run_bash(command, timeout_s)
        return CommandResult(
            command, answer.exit_code, answer.stdout.decode(errors="replace"), answer.stderr
        )

    def run_bytes(self, command: str, *, timeout_s: float | None = None) -> BytesResult:
        return _run_bash(command, timeout_s)

    def put(self, local: Path, remote: str) -> None:
        _copy(local, Path(remote))

    def get(self, remote: str, local: Path) -> None:
        _copy(Path(remote), local)

    def close(self) -> None:
        return None


def _run_bash(command: str, timeout_s: float | None) -> BytesResult:
    proc = subprocess.Popen(
        ["bash", "-c", command],
        stdout=PIPE,
        stderr=PIPE,
        stdin=DEVNULL,
        start_new_session=True,  # so that a timeout ends its children too (_communicate)
    )
    stdout, stderr, timed_out = _communicate(proc, timeout_s)
    said = stderr.decode(errors="replace")
    if timed_out:
        return BytesResult(command, 124, stdout, said + _TIMED_OUT)
    return BytesResult(command, proc.returncode, stdout, said)


def _communicate(
    proc: subprocess.Popen[AnyStr], timeout_s: float | None
) -> tuple[AnyStr, AnyStr, bool]:
    """Its output, and whether it ran past `timeout_s`: then its session is killed, since a
    child left holding its output open would keep communicate() waiting for it."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # all ended meanwhile
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return stdout, stderr, True
    return stdout, stderr, False


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dst)
