"""A Runner for this machine: shell commands through bash, files by copy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from spotrun.remote.runner import CommandResult


class LocalRunner:
    def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult:
        try:
            proc = subprocess.run(
                ["bash", "-c", command],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            return CommandResult(
                command, 124, _text(exc.stdout), _text(exc.stderr) + "\n(timed out)"
            )
        return CommandResult(command, proc.returncode, proc.stdout, proc.stderr)

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


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
