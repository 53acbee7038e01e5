"""A Runner for this machine: shell commands through bash, files by copy."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

from spotrun.remote.runner import CommandResult


class LocalRunner:
    def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult:
        # A session of its own, so that a timeout ends the command's children too: one left
        # holding its output open would keep communicate() waiting for it.
        proc = subprocess.Popen(
            ["bash", "-c", command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # all ended meanwhile
                os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            return CommandResult(command, 124, stdout, stderr + "\n(timed out)")
        return CommandResult(command, proc.returncode, stdout, stderr)

    def put(self, local: Path, remote: str) -> None:
        _copy(local, Path(remote))

    def get(self, remote: str, local: Path) -> None:
        _copy(Path(remote), local)

    def close(self) -> None:
        return None


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dst)
