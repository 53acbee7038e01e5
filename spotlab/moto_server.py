"""The moto server the lab's fronts forward to: one per test process, shared by its labs."""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

import boto3
from botocore.config import Config
from moto.server import ThreadedMotoServer

from spotlab.regions import REGION


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
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
        self.server.start()
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
