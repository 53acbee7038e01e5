"""Where a SPOTRUN_HOME's controller lives when it is not this machine, and how to reach it.

`spotrun controller up --on ssh://USER@HOST:PORT` records the host in SPOTRUN_HOME/remote.json
(`ControllerHost`); from then on the run commands are carried out there, over the system `ssh`
binary (`ssh_argv`): the user's own ssh with the host key pinned on first use in
SPOTRUN_HOME/remote/known_hosts (StrictHostKeyChecking=yes after that), and one shared
connection (ControlMaster) so that each command costs a round trip, not a handshake.

Standard library only: every forwarded command reads this module, and `ls` must stay fast.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from spotrun.core.errors import UsageError

RECORD_FILE = "remote.json"
FOLDER = "remote"  # SPOTRUN_HOME/remote: known_hosts, the shared connection's socket
KNOWN_HOSTS = "known_hosts"
CONNECT_TIMEOUT_S = 10
PERSIST_S = 300  # the shared connection stays this long after the last command
_SOCKET_MAX = 100  # a unix socket path must stay under ~108 bytes


@dataclass(frozen=True)
class SshTarget:
    user: str | None
    host: str
    port: int

    @property
    def login(self) -> str:
        return self.host if self.user is None else f"{self.user}@{self.host}"

    def url(self) -> str:
        port = "" if self.port == 22 else f":{self.port}"
        return f"ssh://{self.login}{port}"


_URL = re.compile(
    r"^ssh://(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9._-]+)(?::(?P<port>\d+))?/?$"
)


def parse_ssh_url(text: str) -> SshTarget:
    """ssh://[USER@]HOST[:PORT] -> SshTarget (UsageError for anything else)."""
    match = _URL.match(text.strip())
    if match is None:
        raise UsageError(
            f"--on {text!r}: expected ssh://[USER@]HOST[:PORT]",
            hint="e.g. --on ssh://me@box.example.org or --on ssh://10.0.0.5:2222",
        )
    port = int(match["port"] or 22)
    if not 0 < port < 65536:
        raise UsageError(f"--on {text!r}: port {port} is not a TCP port")
    host = match["host"]
    if host.startswith("-"):
        raise UsageError(f"--on {text!r}: a host name cannot start with '-'")
    return SshTarget(match["user"], host, port)


@dataclass(frozen=True)
class ControllerHost:
    """remote.json: the host that runs this home's controller, and spotrun's place there."""

    user: str | None
    host: str
    port: int
    key_file: str | None  # the private key ssh uses (None: the user's ssh defaults)
    python: str  # the host's python that runs spotrun
    home: str  # SPOTRUN_HOME on the host (absolute)
    code_dir: str  # spotrun's code on the host (PYTHONPATH)
    version: str  # spotrun's version pushed there
    since: float  # when `controller up` recorded it (unix time)

    @property
    def target(self) -> SshTarget:
        return SshTarget(self.user, self.host, self.port)

    @property
    def where(self) -> str:
        return self.target.url()

    def spotrun_command(self, args: list[str]) -> str:
        """The shell line that runs `spotrun ARGS` on the host, with its home and code."""
        q = shlex.quote
        words = " ".join(q(a) for a in args)
        return (
            f"cd {q(self.home)} 2>/dev/null || cd; SPOTRUN_HOME={q(self.home)} "
            f"PYTHONPATH={q(self.code_dir)} exec {q(self.python)} -m spotrun {words}"
        )


def record_path(home: Path) -> Path:
    return home / RECORD_FILE


def load_record(home: Path) -> ControllerHost | None:
    """This home's remote controller, or None when the controller lives here."""
    path = record_path(home)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
        names = {f.name for f in fields(ControllerHost)}
        return ControllerHost(**{k: v for k, v in data.items() if k in names})
    except (ValueError, TypeError) as exc:
        raise UsageError(
            f"{path} is damaged ({exc})",
            hint="run `spotrun controller up --on ssh://...` again, or delete the file to "
            "use the controller on this machine",
        ) from exc


def save_record(home: Path, record: ControllerHost) -> Path:
    """Write remote.json atomically (temp file, fsync, rename)."""
    home.mkdir(parents=True, exist_ok=True)
    path = record_path(home)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(asdict(record), fh, indent=2, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def forget_record(home: Path) -> None:
    record_path(home).unlink(missing_ok=True)


# ------------------------------------------------------------------ ssh itself
def known_hosts(home: Path) -> Path:
    return home / FOLDER / KNOWN_HOSTS


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


def ensure_shared_connection(home: Path, record: ControllerHost) -> None:
    """Start the shared connection in the background unless its socket is there; a failure
    here is left to the command itself, which connects on its own and says why."""
    socket_path = control_path(home, record.target)
    if _answers(socket_path):
        return
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
    subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=CONNECT_TIMEOUT_S + 20,
        check=False,
    )


def _answers(socket_path: Path) -> bool:
    """Whether a live ssh master listens on the socket (a connect costs microseconds)."""
    import socket

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
