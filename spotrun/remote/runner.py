"""What drives one instance: a Runner runs shell commands and moves files, whatever the cloud.

The local runner (spotrun.remote.local) and the SSH ones (spotrun.remote.ssh, ssh_binary)
implement it; the cloud providers hand one out per instance (spotrun.cloud.base.Provider).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from spotrun.core.errors import RemoteError


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
            tail = (self.stderr or self.stdout).strip().splitlines()[-5:]
            raise RemoteError(f"{what} failed with exit code {self.exit_code}: " + " | ".join(tail))
        return self


@runtime_checkable
class Runner(Protocol):
    """Runs shell commands and moves files on one instance."""

    def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult: ...

    def put(self, local: Path, remote: str) -> None: ...

    def get(self, remote: str, local: Path) -> None: ...

    def close(self) -> None: ...
