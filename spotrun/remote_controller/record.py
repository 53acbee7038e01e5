"""Where a SPOTRUN_HOME's controller lives when it is not this machine: SPOTRUN_HOME/remote.json.

`spotrun controller up --on ssh://USER@HOST:PORT` records the host here (`ControllerHost`);
every command reads it first (one stat when there is none), so this module stays on the
standard library and out of the remote layer, which `spotrun ls` never loads. How the host is
reached is spotrun.remote_controller.connection.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from spotrun.core.errors import LocalFileError, UsageError
from spotrun.core.home import REMOTE_RECORD_FILE
from spotrun.core.rundir import HOME_VAR


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
    r"ssh://(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9._-]+)(?::(?P<port>\d+))?/?"
)


def parse_ssh_url(text: str) -> SshTarget:
    """ssh://[USER@]HOST[:PORT] -> SshTarget (UsageError for anything else)."""
    match = _URL.fullmatch(text.strip())
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
    kind: str = "ssh"  # "ssh": a host of the user's; "aws": spotrun's own on-demand instance
    instance_id: str | None = None  # kind "aws": the instance, its region, type and price
    region: str | None = None
    instance_type: str | None = None
    usd_per_hour: float | None = None
    resource_id: str | None = None  # its spotrun:run-id tag (names its key pair, group)
    disk_gb: int | None = None  # its gp3 root volume, billed stopped or running
    idle_stop_s: float | None = None  # it stops itself this long idle (0: never)
    # [stopped at, started again at] (unix times) of each stop the laptop started it from:
    # no compute billed then, only its root volume
    stopped_spans: list[list[float]] = field(default_factory=list)

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
            f"cd {q(self.home)} 2>/dev/null || cd; {HOME_VAR}={q(self.home)} "
            f"PYTHONPATH={q(self.code_dir)} exec {q(self.python)} -m spotrun {words}"
        )


def record_path(home: Path) -> Path:
    return home / REMOTE_RECORD_FILE


def load_record(home: Path) -> ControllerHost | None:
    """This home's remote controller, or None when the controller lives here."""
    path = record_path(home)
    try:
        text = path.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None  # no record (or no home at all: the command's own check says why)
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


def private_home(home: Path) -> None:
    """SPOTRUN_HOME made, or tightened to, 0700: the controller host's key pin and its shared
    connection live there beside the ledger, the user's alone (a home of another user's is
    left as it is)."""
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = home.stat()
        if mode.st_uid == os.getuid() and mode.st_mode & 0o077:
            os.chmod(home, 0o700)
    except OSError as exc:
        raise LocalFileError(
            f"cannot make {HOME_VAR} at {home} private: {exc.strerror or exc}",
            hint=f"set {HOME_VAR} to a folder you own",
        ) from exc


def save_record(home: Path, record: ControllerHost) -> Path:
    """Write remote.json atomically (temp file, fsync, rename)."""
    private_home(home)
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
