"""What drives one instance: a Runner runs shell commands and moves files, whatever the cloud.

The local runner (spotrun.remote.local) and the SSH ones (spotrun.remote.ssh, and
spotrun.remote_controller.ssh_binary for the controller host) implement it; the cloud
providers hand one out per instance (spotrun.cloud.base.Provider).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from spotrun.core.errors import RemoteCommandError


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def check(self, what: str) -> CommandResult:
        if not self.ok:
            raise _failed(what, self.exit_code, self.stderr or self.stdout)
        return self


@dataclass(frozen=True)
class BytesResult:
    """A command's answer as the bytes it wrote (file contents and names are not text)."""

    command: str
    exit_code: int
    stdout: bytes
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def check(self, what: str) -> BytesResult:
        if not self.ok:
            raise _failed(what, self.exit_code, self.stderr)
        return self


def _failed(what: str, exit_code: int, said: str) -> RemoteCommandError:
    tail = said.strip().splitlines()[-5:]
    return RemoteCommandError(f"{what} failed with exit code {exit_code}: " + " | ".join(tail))


@runtime_checkable
class Runner(Protocol):
    """Runs shell commands and moves files on one instance."""

    def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult: ...

    def run_bytes(self, command: str, *, timeout_s: float | None = None) -> BytesResult:
        """`run`, its output undecoded (the controller's poll: spotrun.remote.probe)."""
        ...

    def put(self, local: Path, remote: str) -> None: ...

    def get(self, remote: str, local: Path) -> None: ...

    def close(self) -> None: ...
