"""`spotrun ui` when the controller lives on another host: its dashboard, reached from here.

The host's ledger and run folders are there, so the dashboard is served there: `spotrun ui
--no-browser` runs on the host over the shared ssh connection that every forwarded command
uses (spotrun.remote_controller.connection), bound to the host's own 127.0.0.1. This side listens on
a port of its own and hands each browser connection to ssh as an `ssh -W` channel of that same
connection to the host's port (ssh reads and writes the accepted socket itself). The URL
printed here carries the host's token, which the host's dashboard checks on every request.
When this side ends, the host's dashboard reads the end of its input and ends too. A controller
instance stopped (idle) is started first, as for any command sent there; one that stops itself
under the dashboard ends it here with one line.
"""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from spotrun.core.config import Settings
from spotrun.core.errors import RemoteError
from spotrun.remote_controller.connection import ensure_shared_connection, ssh_argv, ssh_options
from spotrun.remote_controller.record import ControllerHost
from spotrun.remote_controller.ssh_binary import explain_ssh_failure
from spotrun.remote_controller.wake import awake
from spotrun.ui.server import Address

# the host's dashboard ends when its input does (this side's ssh closes it by ending)
HOST_ARGS = ["ui", "--no-browser", "--end-with-input"]
SSH_EXIT_UNREACHABLE = 255
END_WAIT_S = 30


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "TMUX"}


class HostDashboard:
    """The host's `spotrun ui`, started over ssh: its port and token once it printed its URL."""

    def __init__(self, home: Path, record: ControllerHost) -> None:
        self.home = home
        self.record = record
        ensure_shared_connection(home, record)
        argv = ssh_argv(home, record, record.spotrun_command(HOST_ARGS))
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_environment(),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode(errors="replace").strip()
        parts = urlsplit(line)
        token = parse_qs(parts.query).get("token", [""])[0]
        # what the host says goes on being read, so that its pipe never fills and stalls it
        self.said: deque[str] = deque(maxlen=20)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        if not line.startswith("http://") or parts.port is None or not token:
            raise self.failure("did not start")
        self.port: int = parts.port
        self.token = token

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            if raw.strip():
                self.said.append(raw.decode(errors="replace").rstrip())

    def failure(self, what: str) -> RemoteError:
        """Why the host's dashboard `what` (did not start, ended), in its words or ssh's."""
        self.close()
        self._reader.join(timeout=END_WAIT_S)
        gone = self.proc.returncode == SSH_EXIT_UNREACHABLE
        if gone and what == "ended":
            return RemoteError(
                f"the connection to the controller host {self.record.where} closed: its "
                "dashboard is gone",
                hint="`spotrun controller status` says whether it answers (an idle controller "
                "instance stops itself); `spotrun ui` again reaches it",
            )
        if gone:
            return explain_ssh_failure(self.record, self.home, "\n".join(self.said))
        last = self.said[-1] if self.said else f"it exited {self.proc.returncode}"
        return RemoteError(
            f"the dashboard {what} on the controller host {self.record.where}: {last}",
            hint="run `spotrun controller status` to check the host",
        )

    def channel_argv(self) -> list[str]:
        """ssh carrying its stdin and stdout to the host's dashboard port (`-W`), through the
        shared connection."""
        options = ssh_options(self.home, self.record.target, self.record.key_file)
        return [
            "ssh",
            *options,
            "-o",
            "ControlMaster=no",
            "-W",
            f"127.0.0.1:{self.port}",
            "--",
            self.record.target.login,
        ]

    def close(self) -> None:
        """End the host's dashboard: its input closes, it ends, ssh returns."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=END_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def serve_through_host(
    settings: Settings,
    record: ControllerHost,
    sock: socket.socket,
    *,
    ready: Callable[[Address], None] | None = None,
    log: Callable[[str], None],
) -> None:
    """Serve the host's dashboard on `sock` until interrupted (Ctrl-C) or the host's ends."""
    record = awake(settings, record, log=log)
    dashboard = HostDashboard(settings.home, record)
    log(f"the dashboard of the controller host {record.where}, through spotrun's ssh connection")
    host, port = sock.getsockname()[:2]
    channels: list[subprocess.Popen[bytes]] = []
    try:
        if ready is not None:
            ready(Address(host, port, dashboard.token))
        _carry(sock, dashboard, channels)
    finally:
        sock.close()
        dashboard.close()
        for channel in channels:
            channel.terminate()
            channel.wait()
    raise dashboard.failure("ended")  # only Ctrl-C ends this side without the host's


def _carry(
    sock: socket.socket, dashboard: HostDashboard, channels: list[subprocess.Popen[bytes]]
) -> None:
    """Accept browser connections and give each to an `ssh -W` channel, until the host's
    dashboard ends (its output closes)."""
    assert dashboard.proc.stdout is not None
    output = dashboard.proc.stdout.fileno()
    with selectors.DefaultSelector() as watch:
        watch.register(sock, selectors.EVENT_READ)
        watch.register(output, selectors.EVENT_READ)
        while True:
            for key, _ in watch.select():
                if key.fileobj == output:
                    if not os.read(output, 4096):
                        return  # the host's dashboard ended
                    continue
                conn, _ = sock.accept()
                with conn:  # ssh holds its own copy of the socket from here
                    channels.append(
                        subprocess.Popen(
                            dashboard.channel_argv(),
                            stdin=conn.fileno(),
                            stdout=conn.fileno(),
                            stderr=subprocess.DEVNULL,
                            env=_environment(),
                        )
                    )
            channels[:] = [c for c in channels if c.poll() is None]
