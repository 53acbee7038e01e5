"""Reaching a controller host for the first time, or again after its instance started: one
connection that reads its home folder, and waiting until sshd answers."""

from __future__ import annotations

import subprocess
from pathlib import Path

from spotrun.core.errors import RemoteError, UsageError
from spotrun.core.waiting import WaitTimeout, wait_until
from spotrun.remote_controller import connection as hostrec
from spotrun.remote_controller.record import ControllerHost, SshTarget
from spotrun.remote_controller.ssh_binary import HOST_KEY_REFUSED, explain_ssh_failure


def wait_for_ssh(
    home: Path, target: SshTarget, key: str | None, timeout_s: float, *, first_use: bool = True
) -> None:
    """sshd starts a while after the instance runs: connect until it answers. `first_use`
    False: only with the host key pinned for it (another key fails at once)."""
    last: list[str] = []

    def answers() -> bool:
        try:
            probe(home, target, key, first_use=first_use)
        except RemoteError as exc:
            if HOST_KEY_REFUSED in exc.message:
                raise
            last.append(exc.user_message())
            return False
        return True

    try:
        wait_until(answers, timeout_s=timeout_s, what=f"SSH on {target.url()}")
    except WaitTimeout as exc:
        raise RemoteError(
            f"{target.url()} did not answer SSH within {timeout_s:.0f} s"
            + (f": {last[-1]}" if last else "")
        ) from exc


def probe(
    home: Path, target: SshTarget, key: str | None, *, first_use: bool = True
) -> dict[str, str]:
    """Connect once (pinning the host key if it is new, on `first_use`) and read the host's
    home folder."""
    argv = [
        "ssh",
        *hostrec.ssh_options(home, target, key, first_use=first_use),
        "-o",
        "ControlMaster=no",
        "-T",
        "--",
        target.login,
        'printf "%s\\n" "$HOME"',
    ]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise RemoteError(f"{target.url()} did not answer within 60 s") from exc
    except OSError as exc:
        raise UsageError(f"cannot run ssh: {exc}", hint="install OpenSSH's client") from exc
    if proc.returncode != 0:
        asked = ControllerHost(target.user, target.host, target.port, key, "", "", "", "", 0.0)
        raise explain_ssh_failure(asked, home, proc.stderr)
    found = proc.stdout.strip().splitlines()
    if not found or not found[-1].startswith("/"):
        raise RemoteError(f"{target.url()} did not say where its home folder is: {proc.stdout!r}")
    return {"home": found[-1]}
