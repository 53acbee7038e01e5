"""The lab's AWS endpoint: an HTTP front on loopback that forwards to moto, with what moto lacks.

Every spotrun process of a test (the CLI, detached supervisors, the instances' own uploaders)
reaches AWS through AWS_ENDPOINT_URL, so whatever the front answers reaches all of them, and
their own botocore parses it and retries it. (A botocore before-send handler only reaches the
process that registers it; spotrun's runs are driven by other processes.) The front:

- injects real EC2 error responses (error XML, EC2's status codes) for chosen operations:
  `Faults.add("RunInstances", "InsufficientInstanceCapacity", times=1, zone="us-east-1a")`,
  and S3's SlowDown (503) and InternalError (500): `s3_faults.add("UploadPart", times=3)`
  (ec2faults.py, s3faults.py);
- answers what moto lacks (moto_gaps.py): DescribeSpotPriceHistory from price histories a test
  sets (moto's is one constant from 2006), with StartTime/EndTime and MaxResults/NextToken
  pagination as EC2 does;
- answers the Pricing API's GetProducts from on-demand prices a test sets, and otherwise as an
  account without pricing permissions does (moto has no Pricing API);
- answers the placement group calls (Create/Describe/DeletePlacementGroups, which moto lacks)
  and refuses a RunInstances naming an unknown group, as EC2 does;
- models what EC2 does to fresh instances and moto does not (consistency.py): NotFound and
  absence from filtered listings for a moment after RunInstances, `pending` before `running`,
  ClientToken idempotency;
- authorizes every signed request as IAM would, for the identities the lab made (iam.py);
- tells the lab's watcher the moment RunInstances or TerminateInstances went through.
"""

from __future__ import annotations

import functools
import http.client
import re
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from spotlab.consistency import (
    Consistency,
    ids_named,
    mismatch_error,
    not_found_error,
)
from spotlab.ec2faults import Faults, Holds
from spotlab.iam import Iam
from spotlab.interruptions import SpotRequest, made_ids, requested
from spotlab.moto_gaps import OnDemandPrices, PlacementGroups, Quotas, SpotPrices
from spotlab.regions import PlacementScores, TypeAvailability
from spotlab.s3faults import S3Faults, s3_operation

# How often the server looks for a stop: serve_forever's default (0.5 s) made each lab's close
# wait up to half a second per server (the front and one per host).
STOP_POLL_S = 0.05

CHECKIP_PATH = "/lab/checkip"


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        # A caller that went away (a killed supervisor, a timed-out probe) is no lab failure.
        error = sys.exc_info()[1]
        if isinstance(error, (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class AwsFront:
    """Listens on 127.0.0.1; forwards to moto at `backend` unless it answers itself."""

    def __init__(
        self, backend_host: str, backend_port: int, on_instances_changed: Callable[[], None]
    ) -> None:
        self.backend = (backend_host, backend_port)
        self.faults = Faults()
        self.s3_faults = S3Faults()  # S3's SlowDown and InternalError (s3faults.py)
        self.spot_prices = SpotPrices()
        self.on_demand = OnDemandPrices()
        self.placement = PlacementGroups()
        self.quotas = Quotas()
        self.placement_scores = PlacementScores()  # GetSpotPlacementScores (regions.py)
        self.type_availability = TypeAvailability()  # types a region lacks (regions.py)
        self.run_requests: list[dict[str, str]] = []  # RunInstances parameters, in order
        self.instance_profiles: dict[str, str] = {}  # instance id -> the profile it was given
        # instance id -> the spot request it came from (its interruption behaviour)
        self.spot_requests: dict[str, SpotRequest] = {}
        # Called with RunInstances' answer before it is sent (the lab ends instances there)
        self.after_run_instances: Callable[[bytes], None] | None = None
        # EC2's refusal of a RunInstances it cannot fill (spotlab/capacity.py), checked and
        # made under one lock, so that calls side by side cannot both take a pool's last place
        self.capacity_refusal: Callable[[dict[str, str]], tuple[int, bytes] | None] | None = None
        self._launch_lock = threading.Lock()
        self.on_instances_changed = on_instances_changed
        self.actions: list[str] = []  # every EC2 action seen, in order (tests may count calls)
        self.actions_params: list[dict[str, str]] = []  # and their parameters
        self.public_address = "203.0.113.7"  # TEST-NET-3: answered, never reached
        # action -> [seconds, times]: hold the answer after moto acted (a lost/late response)
        self.delays: dict[str, list[float]] = {}
        self.holds = Holds()  # calls held until the test releases them
        self.consistency = Consistency()  # the lab sets its windows
        # IAM on every signed request (spotlab/iam.py); the lab adds identities and tag lookups
        self.iam = Iam(tags_of=lambda region, kind, resource_id: None)
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return None

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, headers, payload = front.handle(
                    self.command, self.path, dict(self.headers), body
                )
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(
            target=functools.partial(self.server.serve_forever, poll_interval=STOP_POLL_S),
            name="lab-aws-front",
            daemon=True,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if path == CHECKIP_PATH:  # what checkip.amazonaws.com would say this machine is
            return 200, [("Content-Type", "text/plain")], f"{self.public_address}\n".encode()
        refused = self.iam.refusal(method, path, headers, body)
        if refused is not None:
            return refused
        target = headers.get("X-Amz-Target", "")
        if target.startswith("ServiceQuotasV20190624."):
            status, payload = self.quotas.answer(target, body)
            return status, [("Content-Type", "application/x-amz-json-1.1")], payload
        if target.startswith("AWSPriceListService."):
            status, payload = self.on_demand.answer(body)
            return status, [("Content-Type", "application/x-amz-json-1.1")], payload
        service = _service_of(headers.get("Authorization", ""))
        if service == "ec2" and method == "POST":
            params = {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}
            action = params.get("Action", "")
            self.actions.append(action)
            self.actions_params.append(params)
            fault = self.faults.take(action, params)
            if fault is not None:
                status, payload = fault.render(params)
                return status, [("Content-Type", "text/xml")], payload
            if action.endswith("PlacementGroup") or action == "DescribePlacementGroups":
                region = _region_of(headers.get("Authorization", ""))
                status, payload = self.placement.answer(action, params, region)
                return status, [("Content-Type", "text/xml")], payload
            group = params.get("Placement.GroupName")
            region = _region_of(headers.get("Authorization", ""))
            if action == "RunInstances" and group and not self.placement.known(group, region):
                status, payload = self.placement._error(
                    "InvalidPlacementGroup.Unknown", f"The placement group '{group}' is unknown"
                )
                return status, [("Content-Type", "text/xml")], payload
            if action == "RunInstances" and params.get("DryRun") != "true":
                self.run_requests.append(params)
            if action == "GetSpotPlacementScores":  # moto lacks it
                status, payload = self.placement_scores.answer(params)
                return status, [("Content-Type", "text/xml")], payload
            if action == "DescribeSpotPriceHistory" and self.spot_prices.active:
                region = _region_of(headers.get("Authorization", ""))
                return 200, [("Content-Type", "text/xml")], self.spot_prices.answer(params, region)
            hold = self.holds.take(action) if params.get("DryRun") != "true" else None
            if hold is not None:
                hold.arrived.set()
                if not hold.forwarded:
                    hold._wait()
            early = self._consistency_answer(action, params)
            if early is not None:
                return early[0], [("Content-Type", "text/xml")], early[1]
            if action in ("RunInstances", "TerminateInstances") and params.get("DryRun") != "true":
                with self._launch_lock:
                    no_capacity = None
                    if action == "RunInstances" and self.capacity_refusal is not None:
                        no_capacity = self.capacity_refusal(params)
                    if no_capacity is not None:
                        return no_capacity[0], [("Content-Type", "text/xml")], no_capacity[1]
                    response = self._forward(method, path, headers, body)
                if action == "RunInstances" and response[0] == 200:
                    self.consistency.made(params, response[2])
                    self._note_profiles(params, response[2])
                    self._note_spot_request(params, response[2])
                if action == "TerminateInstances" and response[0] == 200:
                    self.consistency.ended_by(action, ids_named(params, "InstanceId"))
                if action == "RunInstances" and self.after_run_instances is not None:
                    self.after_run_instances(response[2])
                self.on_instances_changed()
                self._hold(action)
            else:
                response = self._forward(method, path, headers, body)
                if response[0] == 200:
                    self.consistency.made_resource(action, response[2])
                    if action == "StopInstances":
                        self.consistency.ended_by(action, ids_named(params, "InstanceId"))
                if action in ("StopInstances", "StartInstances"):
                    self.on_instances_changed()  # the watcher stops or boots its host now
            if action == "DescribeInstanceTypes" and response[0] == 200:
                payload = self.type_availability.rewrite(region, response[2])
                response = (response[0], response[1], payload)
            if action == "DescribeInstances" and response[0] == 200:
                by_filter = not ids_named(params, "InstanceId")
                payload = self.consistency.rewrite_describe(response[2], by_filter)
                response = (response[0], response[1], payload)
            if hold is not None and hold.forwarded:
                hold._wait()
            return response
        if service == "s3":
            copy = any(k.lower() == "x-amz-copy-source" for k in headers)
            s3_fault = self.s3_faults.take(s3_operation(method, path, copy))
            if s3_fault is not None:
                status, payload = s3_fault.render()
                return status, [("Content-Type", "application/xml")], payload
        return self._forward(method, path, headers, body)

    def _consistency_answer(self, action: str, params: dict[str, str]) -> tuple[int, bytes] | None:
        """EC2's own answer where it differs from moto's for fresh instances, else None."""
        if params.get("DryRun") == "true":
            return None
        if action == "RunInstances":
            repeat = self.consistency.repeat_of(params)
            if repeat is not None:
                same, first_answer = repeat
                return (200, first_answer) if same else mismatch_error()
            return None
        fresh_resource = self.consistency.resource_unknown_yet(action, params)
        if fresh_resource is not None:
            return fresh_resource
        named = {"DescribeInstances": "InstanceId", "CreateTags": "ResourceId"}.get(action)
        if named is None:
            return None
        fresh = self.consistency.unknown_yet(ids_named(params, named))
        return not_found_error(fresh) if fresh else None

    def _note_profiles(self, params: dict[str, str], answer: bytes) -> None:
        # EC2 gives every instance of a RunInstances its profile; moto only the first.
        profile = (
            params.get("IamInstanceProfile.Name")
            or params.get("IamInstanceProfile.Arn", "").rsplit("/", 1)[-1]
        )
        if profile:
            for instance_id in re.findall(rb"<instanceId>(i-[0-9a-f]+)</instanceId>", answer):
                self.instance_profiles[instance_id.decode()] = profile

    def _note_spot_request(self, params: dict[str, str], answer: bytes) -> None:
        # moto keeps no spot options; EC2 interrupts as the request asked (interruptions.py)
        spot = requested(params)
        if spot is not None:
            for instance_id in made_ids(answer):
                self.spot_requests[instance_id] = spot

    def _hold(self, action: str) -> None:
        delay = self.delays.get(action)
        if delay and delay[1] > 0:
            delay[1] -= 1
            time.sleep(delay[0])

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(*self.backend, timeout=120)
        try:
            forwarded = {k: v for k, v in headers.items() if k.lower() not in _HOP_HEADERS}
            forwarded["Host"] = headers.get("Host", f"{self.backend[0]}:{self.backend[1]}")
            conn.request(method, path, body=body, headers=forwarded)
            response = conn.getresponse()
            payload = response.read()
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_HEADERS]
            return response.status, kept, payload
        finally:
            conn.close()


def _region_of(authorization: str) -> str:
    """The region a SigV4 request is signed for (its credential scope)."""
    if "Credential=" not in authorization:
        return ""
    scope = authorization.split("Credential=", 1)[1].split(",", 1)[0].split("/")
    return scope[2] if len(scope) > 2 else ""


def _service_of(authorization: str) -> str:
    # "AWS4-HMAC-SHA256 Credential=KEY/20260101/us-east-1/ec2/aws4_request, ..."
    marker = "Credential="
    if marker not in authorization:
        return ""
    scope = authorization.split(marker, 1)[1].split(",", 1)[0].split("/")
    return scope[3] if len(scope) > 3 else ""
