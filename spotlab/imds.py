"""A per-instance metadata service speaking IMDSv2, on the instance's own loopback address.

PUT /latest/api/token (with X-aws-ec2-metadata-token-ttl-seconds) returns a token; every GET
must carry it in X-aws-ec2-metadata-token, or gets 401, as on an instance whose launch required
IMDSv2; a token expires after its TTL (`max_token_s` shortens it, `expire_tokens` ends every
one now), and a GET with an expired one is answered 401 too (EC2 User Guide, "Use IMDSv2"). It serves what spotrun's agents and boto3 read on an instance: instance-id, type, zone,
addresses, the instance role's credentials (so boto3 on the host needs no copied keys), the
identity document, and spot/instance-action once the lab announces an interruption.
"""

from __future__ import annotations

import functools
import json
import secrets
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# How often the server looks for a stop: serve_forever's default (0.5 s) made each lab's close
# wait up to half a second per server (the front and one per host).
STOP_POLL_S = 0.05

ROLE = "spotrun-lab-role"
# The instance role's credentials (what the instance profile gives): distinctive, so a test can
# tell them from the user's and look for either where no secret belongs. Each instance's
# session has its own key id (role_credentials), as each EC2 role session has.
ROLE_CREDENTIALS = {
    "AccessKeyId": "ASIASPOTRUNLABROLE3M",
    "SecretAccessKey": "lab-role-secret-Hn5Jm8Kq2Lw7Xe4Rt1Yb9Uc6Vd3Zf0Ga",
    "Token": "lab-role-session-Pz4Ox7Nw1Mv8Lu5Kt2Js9Ir6Hq3Gp0Fo",
}


def role_credentials(instance_id: str) -> dict[str, str]:
    """The role session an instance's profile gives it: its own key id, the lab's secret."""
    suffix = instance_id.removeprefix("i-").upper()
    return {**ROLE_CREDENTIALS, "AccessKeyId": ("ASIALAB" + suffix)[:20].ljust(20, "X")}


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Imds:
    def __init__(
        self,
        address: str,
        port: int,
        *,
        instance_id: str,
        instance_type: str,
        zone: str,
        region: str,
        ami_id: str,
        credentials: Callable[[], dict[str, str] | None] = lambda: None,
        clock_offset_s: float = 0.0,
    ) -> None:
        self.instance_id = instance_id
        # The instance's clock is this far off the lab's (spotlab.hosts.HostSpec): the times
        # served (the notice's "time", the role's expiry) are in the instance's frame, as
        # EC2's and a synchronised instance's agree.
        self.clock_offset_s = clock_offset_s
        # The instance profile's role session, asked at each read (EC2 attaches the profile
        # while the instance starts); None: no profile, and EC2's metadata service then has
        # no iam/security-credentials/ at all.
        self.credentials = credentials
        self.values: dict[str, str] = {
            "meta-data/instance-id": instance_id,
            "meta-data/instance-type": instance_type,
            "meta-data/placement/availability-zone": zone,
            "meta-data/placement/region": region,
            "meta-data/local-ipv4": address,
            "meta-data/ami-id": ami_id,
            "dynamic/instance-identity/document": json.dumps(
                {
                    "instanceId": instance_id,
                    "instanceType": instance_type,
                    "availabilityZone": zone,
                    "region": region,
                    "privateIp": address,
                    "imageId": ami_id,
                    "accountId": "123456789012",
                }
            ),
        }
        self._tokens: dict[str, float] = {}
        self._lock = threading.Lock()
        self.requests = 0
        self.refused = 0  # GETs answered 401: no token, or one expired (tests look)
        # The longest a token lives here whatever TTL was asked (None: as asked): a test's
        # way to see a token run out within seconds instead of hours.
        self.max_token_s: float | None = None
        imds = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return None

            def _send(self, status: int, body: str, content_type: str = "text/plain") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    # The agent gave up on this answer (its timeout, under load) and polls
                    # again; as on a real instance, that is not the service's error.
                    self.close_connection = True

            def do_PUT(self) -> None:
                imds.requests += 1
                if self.path != "/latest/api/token":
                    return self._send(404, "Not Found")
                ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
                if not ttl or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                    return self._send(400, "Bad Request")
                token = secrets.token_urlsafe(32)
                lives = min(int(ttl), imds.max_token_s or int(ttl))
                with imds._lock:
                    imds._tokens[token] = time.monotonic() + lives
                self._send(200, token)

            def do_GET(self) -> None:
                imds.requests += 1
                token = self.headers.get("X-aws-ec2-metadata-token", "")
                with imds._lock:
                    valid = imds._tokens.get(token, 0) > time.monotonic()
                    imds.refused += 0 if valid else 1
                if not valid:
                    return self._send(401, "Unauthorized")
                if not self.path.startswith("/latest/"):
                    return self._send(404, "Not Found")
                key = self.path[len("/latest/") :]
                value = imds.lookup(key)
                if value is None:
                    return self._send(404, "Not Found")
                self._send(200, value)

        self.server = ThreadingHTTPServer((address, port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{address}:{port}"
        self._thread = threading.Thread(
            target=functools.partial(self.server.serve_forever, poll_interval=STOP_POLL_S),
            name=f"imds-{instance_id}",
            daemon=True,
        )
        self._thread.start()

    def lookup(self, key: str) -> str | None:
        if key.startswith("meta-data/iam/security-credentials/"):
            return self._role_answer(key)
        with self._lock:
            return self.values.get(key)

    def _role_answer(self, key: str) -> str | None:
        credentials = self.credentials()
        if credentials is None:
            return None
        if key == "meta-data/iam/security-credentials/":
            return ROLE
        if key == f"meta-data/iam/security-credentials/{ROLE}":
            now = self.now()
            return json.dumps(
                {
                    "Code": "Success",
                    "LastUpdated": _iso(now),
                    "Type": "AWS-HMAC",
                    **credentials,
                    "Expiration": _iso(now + 6 * 3600),
                }
            )
        return None

    def now(self) -> float:
        """The instance's wall clock: the lab's, off by clock_offset_s."""
        return time.time() + self.clock_offset_s

    def announce(self, key: str, value: str | None) -> None:
        """Serve (or, with None, stop serving) `key`, e.g. meta-data/spot/instance-action."""
        with self._lock:
            if value is None:
                self.values.pop(key, None)
            else:
                self.values[key] = value

    def expire_tokens(self) -> None:
        """Every token given so far expires now (as its TTL running out, or the instance
        stopped and started): the next GET with one is answered 401."""
        with self._lock:
            self._tokens.clear()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
