"""The moto server the lab's fronts forward to: one per test process, shared by its labs.

It counts the requests that may have changed an instance (`state_changes()`): the lab's host
watcher looks at EC2 again only when the count moved, instead of describing every instance
twice a second whether or not anything happened (each look took some 25-65 ms of this
process's CPU: boto3, moto and XML both ways).
"""

from __future__ import annotations

import functools
import io
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

import boto3
import moto.backends
import moto.core.responses
from botocore.config import Config
from moto.core.utils import method_names_from_class
from moto.server import ThreadedMotoServer

from spotlab.regions import REGION

# EC2 actions that only read: everything else (any other EC2 action, an unsigned request,
# moto's own /moto-api/) may have changed an instance and counts.
_READS = ("Describe", "Get")
_changes = 0
_changes_lock = threading.Lock()


def state_changes() -> int:
    """How many requests that may have changed an instance this process's moto servers took."""
    return _changes


def _count_change() -> None:
    global _changes
    with _changes_lock:
        _changes += 1


def _may_change_instances(environ: dict[str, Any]) -> bool:
    """Whether moto's answer to this request may change an instance (read, then put back)."""
    authorization = environ.get("HTTP_AUTHORIZATION", "")
    if "Credential=" in authorization:
        scope = authorization.split("Credential=", 1)[1].split(",", 1)[0].split("/")
        if len(scope) > 3 and scope[3] != "ec2":
            return False  # S3, SSM, STS, IAM: no instance changes there
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length <= 0:
        return True
    body = environ["wsgi.input"].read(length)
    environ["wsgi.input"] = io.BytesIO(body)
    action = parse_qs(body.decode(errors="replace")).get("Action", [""])[0]
    return not action.startswith(_READS)


def _quicker_moto() -> None:
    """moto works out per request what cannot change while it runs: a response class's method
    names (inspect.getmembers) and its own package's folder listing (a stat per entry), some
    tenth of its CPU per request. Computed once here; every answer stays the same."""
    if getattr(moto.core.responses, "method_names_from_class", None) is method_names_from_class:
        cached = functools.cache(method_names_from_class)
        setattr(moto.core.responses, "method_names_from_class", cached)  # noqa: B010
        modules = tuple(moto.backends.list_of_moto_modules())
        setattr(moto.backends, "list_of_moto_modules", lambda: modules)  # noqa: B010


class _ChangeCounter:
    """moto's WSGI application, counting the requests that may change an instance."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        changes = _may_change_instances(environ)
        try:
            return self.app(environ, start_response)
        finally:
            if changes:  # counted once moto acted: a look after this sees what it did
                _count_change()


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


class MotoServer:
    """One moto server per test process, shared by its labs (each lab has its own VPC)."""

    _shared: MotoServer | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        _quicker_moto()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
        self.server.start()
        # werkzeug's server calls its `app` per request; ThreadedMotoServer keeps it in _server
        wsgi = self.server._server
        assert wsgi is not None
        wsgi.app = _ChangeCounter(wsgi.app)
        host, port = self.server.get_host_and_port()
        self.host, self.port = str(host), int(port)
        self.url = f"http://{self.host}:{self.port}"
        self._clients: dict[tuple[str, str], Any] = {}

    @classmethod
    def shared(cls) -> MotoServer:
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def client(self, service: str, region: str = REGION) -> Any:
        """A client straight to moto (made once: botocore takes a good part of a second)."""
        with self._lock:
            if (service, region) not in self._clients:
                config = Config(
                    region_name=region, retries={"mode": "standard", "total_max_attempts": 3}
                )
                session = boto3.session.Session(
                    aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region
                )
                self._clients[(service, region)] = session.client(
                    service, endpoint_url=self.url, config=config
                )
            return self._clients[(service, region)]
