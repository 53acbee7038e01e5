"""A minimal IMDSv2 client for the agent: a session token first, then GETs that carry it.

Only the standard library (the agent stays light). The base URL comes from configuration
(`aws.metadata_url`): http://169.254.169.254 on EC2, a per-host endpoint in the lab.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

TOKEN_TTL_S = 21600  # the longest IMDS grants; renewed well before it runs out
_RENEW_MARGIN_S = 60.0


# spot/instance-action's "time" (EC2 User Guide, "Spot Instance interruption notices"): UTC,
# to the second, e.g. 2026-12-06T07:23:36Z.
NOTICE_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def notice_time(stamp: object) -> float | None:
    """A notice's "time" as unix seconds; None when it is missing or not EC2's format."""
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.strptime(stamp, NOTICE_TIME_FORMAT)
    except ValueError:
        return None
    return moment.replace(tzinfo=timezone.utc).timestamp()


class MetadataError(Exception):
    """The metadata service did not answer (or refused the token)."""


class Imds:
    def __init__(self, base_url: str, *, timeout_s: float = 2.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._token: str | None = None
        self._token_until = 0.0

    def _fresh_token(self) -> str:
        if self._token is not None and time.monotonic() < self._token_until:
            return self._token
        request = urllib.request.Request(
            f"{self.base_url}/latest/api/token",
            method="PUT",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_S)},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                token = str(response.read().decode())
        except (OSError, urllib.error.URLError) as exc:
            raise MetadataError(f"no IMDSv2 token from {self.base_url}: {exc}") from exc
        self._token = token
        self._token_until = time.monotonic() + TOKEN_TTL_S - _RENEW_MARGIN_S
        return token

    def get(self, path: str) -> str | None:
        """The value at /latest/`path`, or None when the service has none (404)."""
        for attempt in range(2):
            request = urllib.request.Request(
                f"{self.base_url}/latest/{path}",
                headers={"X-aws-ec2-metadata-token": self._fresh_token()},
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return str(response.read().decode())
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return None
                if exc.code == 401 and attempt == 0:  # the token expired early: get another
                    self._token = None
                    continue
                raise MetadataError(f"IMDS answered {exc.code} for {path}") from exc
            except (OSError, urllib.error.URLError) as exc:
                raise MetadataError(f"IMDS did not answer {path}: {exc}") from exc
        raise MetadataError(f"IMDS refused a fresh token for {path}")
