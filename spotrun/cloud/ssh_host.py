"""How the user's own OpenSSH reaches a run's instance: address, key and pinned host key.

The same facts make `spotrun attach` and `spotrun ssh` (an ssh argv) and the entries of the
ssh config include that spotrun keeps (spotrun.control.ssh_config), so every way in checks the
host key spotrun pinned on first contact, never whatever answers at that address.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SshHost:
    host: str
    port: int
    user: str
    identity_file: Path
    known_hosts: Path  # holds the pinned host key only

    def argv(self, *, tty: bool, command: str | None = None) -> list[str]:
        """`ssh` with this host's key and pinned host key; a login shell without `command`."""
        args = [
            "ssh",
            "-i",
            str(self.identity_file),
            "-p",
            str(self.port),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
        ]
        if tty:
            args.append("-t")
        args.append(f"{self.user}@{self.host}")
        if command is not None:
            args.append(command)
        return args

    def config_entry(self, alias: str) -> str:
        """A `Host` block of an ssh config file (ssh_config(5)), paths quoted."""
        return "\n".join(
            [
                f"Host {alias}",
                f"    HostName {self.host}",
                f"    Port {self.port}",
                f"    User {self.user}",
                f'    IdentityFile "{self.identity_file}"',
                "    IdentitiesOnly yes",
                f'    UserKnownHostsFile "{self.known_hosts}"',
                "    StrictHostKeyChecking yes",
                "",
            ]
        )
