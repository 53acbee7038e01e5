"""How the controller host recorded in SPOTRUN_HOME/remote.json is reached: the system ssh.

The run commands are carried out there over the user's own `ssh` binary (`ssh_argv`): their
keys and agent, the host key pinned on first use in SPOTRUN_HOME/remote/known_hosts
(StrictHostKeyChecking=yes after that), and one shared connection (ControlMaster) so that each
command costs a round trip, not a handshake. Standard library only. A known_hosts that exists
but cannot be read, or holds a line that is no host key, refuses every connection with one line
naming it (LocalFileError): ssh would skip such a line and, on first use, pin whatever key the
host shows.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import socket
import subprocess
import tempfile
from pathlib import Path

from spotrun.core.errors import LocalFileError
from spotrun.remote_controller.record import ControllerHost, SshTarget

FOLDER = "remote"  # SPOTRUN_HOME/remote: known_hosts, the shared connection's socket
KNOWN_HOSTS = "known_hosts"
CONNECT_TIMEOUT_S = 10
PERSIST_S = 300  # the shared connection stays this long after the last command
_SOCKET_MAX = 100  # a unix socket path must stay under ~108 bytes


# ------------------------------------------------------------------ ssh itself
def known_hosts(home: Path) -> Path:
    return home / FOLDER / KNOWN_HOSTS


def check_known_hosts(home: Path) -> None:
    """LocalFileError unless the pins file is absent or every line of it reads as a pin."""
    path = known_hosts(home)
    hint = (
        f"restore {path}; or remove the damaged line (or the file) and run `spotrun controller "
        "up` again, which pins the key the host shows"
    )
    try:
        text = path.read_text()
    except FileNotFoundError:
        return
    except (OSError, UnicodeDecodeError) as exc:
        raise LocalFileError(
            f"the controller host's pinned keys {path} cannot be read ({exc}): connection refused",
            hint=hint,
        ) from exc
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0].startswith("@"):  # @cert-authority, @revoked
            words = words[1:]
        if len(words) < 3 or not _is_base64(words[2]):
            raise LocalFileError(
                f"line {number} of the controller host's pinned keys {path} is not a host key: "
                "connection refused",
                hint=hint,
            )


def _is_base64(text: str) -> bool:
    try:
        return bool(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        return False


def control_path(home: Path, target: SshTarget) -> Path:
    """The shared connection's socket: in SPOTRUN_HOME/remote when the path is short enough
    for a unix socket, else in a private folder of the temp dir (named by the home)."""
    name = hashlib.sha256(f"{home.resolve()}|{target.url()}".encode()).hexdigest()[:16]
    inside = home / FOLDER / f"cm-{name}"
    if len(str(inside)) < _SOCKET_MAX:
        return inside
    folder = Path(tempfile.gettempdir()) / f"spotrun-cm-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder / name


def ssh_options(
    home: Path, target: SshTarget, key_file: str | None, *, first_use: bool = False
) -> list[str]:
    """ssh's options: the pinned host key (accepted on first use only), the key, no prompts."""
    folder = home / FOLDER
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_known_hosts(home)
    options = [
        "-p",
        str(target.port),
        "-o",
        f"UserKnownHostsFile={known_hosts(home)}",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        f"StrictHostKeyChecking={'accept-new' if first_use else 'yes'}",
        "-o",
        "BatchMode=yes",  # never a password prompt: a key or the agent, or a clear failure
        "-o",
        f"ConnectTimeout={CONNECT_TIMEOUT_S}",
        "-o",
        "ServerAliveInterval=15",
        "-o",
        "ServerAliveCountMax=4",
        "-o",
        f"ControlPath={control_path(home, target)}",
    ]
    if key_file is not None:
        options += ["-i", key_file, "-o", "IdentitiesOnly=yes"]
    return options


def ssh_argv(
    home: Path, record: ControllerHost, command: str | None, *, tty: bool = False
) -> list[str]:
    """`ssh ... HOST COMMAND` through the shared connection (used when it is up)."""
    argv = ["ssh", *ssh_options(home, record.target, record.key_file), "-o", "ControlMaster=no"]
    argv.append("-t" if tty else "-T")
    argv += ["--", record.target.login]
    if command is not None:
        argv.append(command)
    return argv


def ensure_shared_connection(home: Path, record: ControllerHost) -> bool:
    """Start the shared connection in the background unless its socket is there; whether it
    is up. A failure here is left to the command itself, which connects on its own and says
    why (or, for a controller instance, to the caller, who asks EC2 whether it is stopped)."""
    socket_path = control_path(home, record.target)
    if _answers(socket_path):
        return True
    socket_path.unlink(missing_ok=True)  # a master that died (the host rebooted) left it
    argv = [
        "ssh",
        *ssh_options(home, record.target, record.key_file),
        "-o",
        "ControlMaster=auto",
        "-o",
        f"ControlPersist={PERSIST_S}",
        "-N",
        "-f",
        "--",
        record.target.login,
    ]
    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=CONNECT_TIMEOUT_S + 20,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


def host_key_name(target: SshTarget) -> str:
    """The host's name in known_hosts: HOST, or [HOST]:PORT off port 22."""
    return target.host if target.port == 22 else f"[{target.host}]:{target.port}"


def pinned_keys(home: Path, target: SshTarget) -> list[str]:
    """The host keys pinned for `target` ("TYPE BASE64" each), hashed names included."""
    path = known_hosts(home)
    check_known_hosts(home)  # a damaged file is no "none pinned": that would pin again
    if not path.exists():
        return []
    proc = subprocess.run(
        ["ssh-keygen", "-F", host_key_name(target), "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    keys = []
    for line in proc.stdout.splitlines():
        words = line.split()
        if len(words) >= 3 and not line.startswith("#") and not words[0].startswith("@"):
            keys.append(f"{words[1]} {words[2]}")
    return keys


def repin(home: Path, old: SshTarget, new: SshTarget) -> bool:
    """The same machine at a new address (a stopped instance started again gets a new public
    one): its pinned host keys written for the new name too, so that ssh checks the machine
    there against them (StrictHostKeyChecking=yes). False when none was pinned."""
    if host_key_name(old) == host_key_name(new):
        return bool(pinned_keys(home, old))
    keys = pinned_keys(home, old)
    if not keys:
        return False
    # whatever was pinned for the new address before (another machine then) goes
    subprocess.run(
        ["ssh-keygen", "-R", host_key_name(new), "-f", str(known_hosts(home))],
        capture_output=True,
        timeout=30,
        check=False,
    )
    with open(known_hosts(home), "a") as fh:
        fh.writelines(f"{host_key_name(new)} {key}\n" for key in keys)
    return True


def _answers(socket_path: Path) -> bool:
    """Whether a live ssh master listens on the socket (a connect costs microseconds)."""
    if not socket_path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(socket_path))
        except OSError:
            return False
    return True


def close_shared_connection(home: Path, record: ControllerHost) -> None:
    """End the shared connection (its background ssh process), if it is up."""
    socket_path = control_path(home, record.target)
    if not socket_path.exists():
        return
    argv = ["ssh", *ssh_options(home, record.target, record.key_file), "-O", "exit"]
    subprocess.run(
        [*argv, "--", record.target.login],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=30,
        check=False,
    )
    socket_path.unlink(missing_ok=True)
