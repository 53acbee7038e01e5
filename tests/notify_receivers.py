"""Servers on 127.0.0.1 that receive what spotrun's notifications send: an HTTP server that
records every POST (Slack, ntfy, webhook), and aiosmtpd recording every email."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from dataclasses import dataclass
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword


@dataclass(frozen=True)
class Post:
    path: str
    headers: dict[str, str]
    body: bytes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpReceiver:
    """Records POSTs; `start` may come after spotrun first tried it (a target that is down)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.posts: list[Post] = []
        self._server: ThreadingHTTPServer | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> HttpReceiver:
        posts = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", "0"))
                posts.append(Post(self.path, dict(self.headers.items()), self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass  # quiet: the test asserts what arrived

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.allow_reuse_address = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class SmtpReceiver:
    """aiosmtpd on 127.0.0.1 taking one user's login (over plain text, loopback only)."""

    def __init__(self, user: str, password: str, tls: ssl.SSLContext | None = None) -> None:
        self.port = free_port()
        self.emails: list[Message] = []
        self.logins: list[str] = []
        receiver = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Envelope) -> str:  # noqa: N802
                content = envelope.original_content or b""
                receiver.emails.append(message_from_bytes(content))
                return "250 OK"

        def authenticate(
            server: Any, session: Any, envelope: Any, mechanism: str, data: Any
        ) -> AuthResult:
            ok = (
                isinstance(data, LoginPassword)
                and data.login.decode() == user
                and data.password.decode() == password
            )
            if ok:
                receiver.logins.append(user)
            return AuthResult(success=ok)

        self._controller = Controller(
            Handler(),
            hostname="127.0.0.1",
            port=self.port,
            authenticator=authenticate,
            # with `tls`, STARTTLS before anything else (and before the login)
            auth_require_tls=tls is not None,
            tls_context=tls,
            require_starttls=tls is not None,
        )

    def start(self) -> SmtpReceiver:
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()


def self_signed(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A certificate for 127.0.0.1 (its own CA: a client trusts it through SSL_CERT_FILE),
    and the server's TLS context holding it."""
    cert, key = folder / "smtp-cert.pem", folder / "smtp-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return cert, context
