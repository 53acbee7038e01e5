"""boto3 clients, one per service and region, with the retry rules spotrun relies on.

Standard retry mode absorbs throttling (RequestLimitExceeded) with backoff; capacity, quota and
permission errors are never retried (see errors.fail_fast) so a launch moves on at once.
"""

from __future__ import annotations

import os
import threading
from difflib import get_close_matches
from typing import Any

import boto3
from botocore.config import Config
from botocore.loaders import create_loader

from spotrun.cloud.aws.errors import CREDENTIAL_ERRORS, credentials_error, fail_fast
from spotrun.core.config import AwsSettings
from spotrun.core.errors import UsageError

_SESSION_LOCK = threading.Lock()
# One boto3 session, and one client per service, region and retry budget, for each AWS
# environment (credentials, profile, endpoint) a process meets: sessions cache the service
# models (the EC2 model alone takes a good part of a second to load) and clients are
# thread-safe, so a second provider in a process costs nothing.
_SESSIONS: dict[tuple[tuple[str, str], ...], boto3.session.Session] = {}
_CLIENTS: dict[tuple[object, ...], Any] = {}


def _aws_environment() -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))


def shared_session() -> boto3.session.Session:
    with _SESSION_LOCK:
        key = _aws_environment()
        if key not in _SESSIONS:
            try:
                _SESSIONS[key] = boto3.session.Session()
            except CREDENTIAL_ERRORS as exc:  # AWS_PROFILE names no profile
                raise credentials_error(exc) from exc
        return _SESSIONS[key]


class AwsClients:
    def __init__(self, settings: AwsSettings) -> None:
        self.settings = settings
        self._environment = _aws_environment()
        self._session = shared_session()
        self._clients = _CLIENTS
        self._lock = _SESSION_LOCK

    def client(
        self, service: str, region: str | None = None, *, attempts: int | None = None
    ) -> Any:
        region = region or self.settings.region
        total = attempts or self.settings.max_attempts
        key = (service, region, total, self._environment)
        with self._lock:  # creating clients from one session is not thread-safe
            found = self._clients.get(key)
            if found is not None:
                return found
            config = Config(
                region_name=region,
                retries={"mode": "standard", "total_max_attempts": total},
                connect_timeout=10,
                read_timeout=60,
                user_agent_extra="spotrun",
            )
            try:
                made = self._session.client(service, config=config)
            except CREDENTIAL_ERRORS as exc:  # e.g. a key id without its secret
                raise credentials_error(exc) from exc
            if service == "ec2":
                for operation in ("RunInstances", "CreateFleet", "RequestSpotInstances"):
                    made.meta.events.register(f"needs-retry.ec2.{operation}", fail_fast)
            self._clients[key] = made
            return made

    def known_regions(self) -> list[str]:
        """The regions botocore knows (its small partitions file: the endpoints file that
        get_available_regions reads takes a quarter of a second to load)."""
        data = create_loader().load_data("partitions")
        return sorted(
            name
            for partition in data.get("partitions", [])
            for name in partition.get("regions", {})
            if not name.endswith("-global")
        )

    def check_region(self, region: str) -> str:
        """`region`, if EC2 has it; a UsageError naming close matches otherwise."""
        known = self.known_regions()
        if region in known:
            return region
        near = get_close_matches(region, known, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(near)}" if near else "e.g. us-east-1, eu-west-1"
        raise UsageError(f"unknown AWS region '{region}'", hint=hint)
