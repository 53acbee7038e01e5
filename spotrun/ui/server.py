"""Serving the dashboard: the address checked, a fresh token, uvicorn on this machine.

Binds 127.0.0.1 unless told otherwise; any other address is refused unless the caller says it
means to expose the dashboard (`spotrun ui --host ADDR --expose`), and then it is told what
that exposes.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

from spotrun.core.errors import UsageError
from spotrun.store.ledger import Ledger
from spotrun.ui.app import Dashboard, build_app

EXPOSED_WARNING = (
    "the dashboard on {host} is reachable by anyone who can reach this address and port: "
    "with the token they see every run, its logs and costs, and can stop and resume runs "
    "(the token is the only lock; the traffic is plain HTTP)"
)


@dataclass(frozen=True)
class Address:
    host: str
    port: int
    token: str

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}/?token={self.token}"


def check_host(host: str, *, expose: bool) -> str | None:
    """None for a loopback address; the warning to print for another one the user chose to
    expose; a UsageError for another one without --expose."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback:
        return None
    if not expose:
        raise UsageError(
            f"--host {host} would let other machines reach the dashboard",
            hint="add --expose if you mean that, or leave --host out (127.0.0.1)",
        )
    return EXPOSED_WARNING.format(host=host)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, taken now: a port in use is one error line, before anything."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    return sock


def serve(
    ledger: Ledger,
    sock: socket.socket,
    *,
    token: str | None = None,
    ready: Callable[[Address], None] | None = None,
    end_with_input: bool = False,
) -> None:
    """Serve the dashboard on `sock` until interrupted (Ctrl-C), or, with `end_with_input`,
    until its standard input ends (the ssh session of a dashboard reached from elsewhere)."""
    host, port = sock.getsockname()[:2]
    address = Address(host, port, token or secrets.token_urlsafe(24))
    dashboard = Dashboard(ledger, address.token)
    config = uvicorn.Config(
        build_app(dashboard), log_level="warning", access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    if end_with_input:

        def end_when_input_ends() -> None:
            sys.stdin.buffer.read()  # returns at the end of input only
            server.should_exit = True

        threading.Thread(target=end_when_input_ends, daemon=True).start()
    if ready is not None:
        ready(address)
    try:
        server.run(sockets=[sock])
    finally:
        dashboard.close()
