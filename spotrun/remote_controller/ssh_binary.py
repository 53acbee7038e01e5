"""A Runner over the system `ssh` binary, for the controller host (pull, controller up).

The controller host is the user's own machine, reached as the user reaches it: their ssh,
keys and agent, the host key pinned in SPOTRUN_HOME/remote/known_hosts, one shared connection
(spotrun.remote_controller.connection). Files travel through the same connection: `cat` for one
file, tar for a folder; a growing file's new bytes come with the listing (spotrun.remote.probe).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from spotrun.core.errors import RemoteError
from spotrun.remote.runner import BytesResult, CommandResult
from spotrun.remote_controller.connection import ensure_shared_connection, ssh_argv
from spotrun.remote_controller.record import ControllerHost

_DEFAULT_TIMEOUT_S = 600.0
HOST_KEY_CHANGED = "REMOTE HOST IDENTIFICATION HAS CHANGED"
HOST_KEY_REFUSED = "presented a host key other than the one pinned"


def explain_ssh_failure(record: ControllerHost, home: Path, stderr: str) -> RemoteError:
    """ssh's own exit 255 (it could not connect or log in), in words that say what to do."""
    said = " | ".join(line for line in stderr.strip().splitlines()[-3:] if line.strip())
    if HOST_KEY_CHANGED in stderr or "Host key verification failed" in stderr:
        return RemoteError(
            f"the controller host {record.where} {HOST_KEY_REFUSED} when `spotrun "
            "controller up` first reached it: connection refused",
            hint=f"if the host was legitimately rebuilt, remove its line from "
            f"{home / 'remote' / 'known_hosts'} and run `spotrun controller up` again",
        )
    return RemoteError(
        f"cannot reach the controller host {record.where}: {said or 'ssh exited 255'}",
        hint="check that it is up and that `spotrun controller status` reaches it",
    )


class SshBinaryRunner:
    """Commands and files on the controller host, through the system ssh."""

    def __init__(self, home: Path, record: ControllerHost) -> None:
        self.home = home
        self.record = record
        ensure_shared_connection(home, record)

    @property
    def where(self) -> str:
        return f"the controller host {self.record.where}"

    def _ssh(
        self, command: str, *, stdin: bytes | None = None, timeout_s: float | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        argv = ssh_argv(self.home, self.record, command)
        try:
            proc = subprocess.run(
                argv,
                input=stdin if stdin is not None else b"",
                capture_output=True,
                timeout=timeout_s or _DEFAULT_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RemoteError(
                f"{self.where} did not answer within {exc.timeout:.0f} s running {command[:80]!r}"
            ) from exc
        except OSError as exc:
            raise RemoteError(f"cannot run ssh: {exc}", hint="install OpenSSH's client") from exc
        if proc.returncode == 255:
            raise explain_ssh_failure(self.record, self.home, proc.stderr.decode(errors="replace"))
        return proc

    def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult:
        proc = self._ssh(command, timeout_s=timeout_s)
        return CommandResult(
            command,
            proc.returncode,
            proc.stdout.decode(errors="replace"),
            proc.stderr.decode(errors="replace"),
        )

    def run_bytes(self, command: str, *, timeout_s: float | None = None) -> BytesResult:
        proc = self._ssh(command, timeout_s=timeout_s)
        return BytesResult(
            command, proc.returncode, proc.stdout, proc.stderr.decode(errors="replace")
        )

    def put(self, local: Path, remote: str, *, private: bool = False) -> None:
        """Copy a file or folder there; `private`: readable by the SSH user alone (0600)."""
        q = shlex.quote
        if local.is_dir():
            tar = subprocess.run(
                ["tar", "-C", str(local), "-czf", "-", "."], capture_output=True, check=False
            )
            if tar.returncode != 0:
                raise RemoteError(f"cannot pack {local}: {tar.stderr.decode(errors='replace')}")
            command = f"mkdir -p {q(remote)} && tar -xzf - -C {q(remote)}"
            data = tar.stdout
        else:
            tmp = f"{remote}.part"
            command = (
                f'mkdir -p "$(dirname {q(remote)})" && cat > {q(tmp)} && mv -f {q(tmp)} {q(remote)}'
            )
            data = local.read_bytes()
        if private:
            command = f"umask 077 && {command}"
        proc = self._ssh(command, stdin=data)
        if proc.returncode != 0:
            raise RemoteError(
                f"cannot copy {local} to {self.where}:{remote}: "
                f"{proc.stderr.decode(errors='replace').strip()}"
            )

    def get(self, remote: str, local: Path) -> None:
        proc = self._ssh(f"cat {shlex.quote(remote)}")
        if proc.returncode != 0:
            raise RemoteError(
                f"cannot copy {self.where}:{remote} to {local}: "
                f"{proc.stderr.decode(errors='replace').strip()}"
            )
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(local.name + ".part")
        tmp.write_bytes(proc.stdout)
        os.replace(tmp, local)

    def close(self) -> None:
        """Nothing to close: the shared connection ends by itself when idle."""
