"""Faults the lab's front injects into EC2 calls: error answers (EC2's XML and status codes)
and calls held until a test releases them, so a fault can land while spotrun waits."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

# HTTP status EC2 sends with each code (capacity errors are server errors).
STATUS = {
    "InsufficientInstanceCapacity": 500,
    "InsufficientCapacity": 500,
    "RequestLimitExceeded": 503,
    "Unavailable": 503,
    "InternalError": 500,
}
DEFAULT_MESSAGES = {
    "InsufficientInstanceCapacity": (
        "We currently do not have sufficient {type} capacity in the Availability Zone you "
        "requested ({zone}). Our system will be working on provisioning additional capacity."
    ),
    "SpotMaxPriceTooLow": "Your Spot request price is lower than the minimum required Spot request fulfillment price.",
    "MaxSpotInstanceCountExceeded": "Max spot instance count exceeded",
    "VcpuLimitExceeded": (
        "You have requested more vCPU capacity than your current vCPU limit of 0 allows for the "
        "instance bucket that the specified instance type belongs to."
    ),
    "UnauthorizedOperation": (
        "You are not authorized to perform this operation. Encoded authorization failure "
        "message: lab-encoded-message"
    ),
    "RequestLimitExceeded": "Request limit exceeded.",
}


@dataclass
class Fault:
    """Answer matching calls with an EC2 error, `times` times (None: until removed)."""

    action: str
    code: str
    times: int | None = 1
    message: str | None = None
    status: int | None = None
    match: dict[str, str] = field(default_factory=dict)  # request parameters that must match
    zone: str | None = None  # named in the message, as EC2 does
    hits: int = 0

    def matches(self, action: str, params: dict[str, str]) -> bool:
        if action != self.action or self.times == 0:
            return False
        return all(params.get(key) == value for key, value in self.match.items())

    def render(self, params: dict[str, str]) -> tuple[int, bytes]:
        template = self.message or DEFAULT_MESSAGES.get(self.code, f"lab-injected {self.code}")
        zone = self.zone or "the requested zone"
        message = template.format(type=params.get("InstanceType", "?"), zone=zone)
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Response><Errors><Error><Code>{escape(self.code)}</Code>"
            f"<Message>{escape(message)}</Message></Error></Errors>"
            f"<RequestID>{uuid.uuid4()}</RequestID></Response>"
        )
        return self.status or STATUS.get(self.code, 400), body.encode()


@dataclass
class Hold:
    """Hold the next EC2 `action` call until the test releases it.

    `forwarded`: EC2 acts first and the answer is held (the caller has not heard yet);
    otherwise the request itself waits (EC2 has not acted yet). A test waits for `arrived`,
    does what must happen meanwhile (a spot notice, a reclaim), then calls `release()`.
    """

    action: str
    forwarded: bool = False
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    limit_s: float = 60.0  # released anyway after this (a test that failed meanwhile)

    def wait_arrived(self, timeout: float) -> bool:
        return self.arrived.wait(timeout)

    def release(self) -> None:
        self.released.set()

    def _wait(self) -> None:
        self.released.wait(self.limit_s)


class Holds:
    def __init__(self) -> None:
        self._waiting: list[Hold] = []
        self._lock = threading.Lock()

    def add(self, action: str, *, forwarded: bool = False) -> Hold:
        hold = Hold(action, forwarded)
        with self._lock:
            self._waiting.append(hold)
        return hold

    def take(self, action: str) -> Hold | None:
        with self._lock:
            for hold in self._waiting:
                if hold.action == action:
                    self._waiting.remove(hold)
                    return hold
        return None


class Faults:
    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(
        self,
        action: str,
        code: str,
        *,
        times: int | None = 1,
        message: str | None = None,
        status: int | None = None,
        zone: str | None = None,
        match: dict[str, str] | None = None,
    ) -> Fault:
        fault = Fault(action, code, times, message, status, dict(match or {}), zone)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def take(self, action: str, params: dict[str, str]) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(action, params):
                    fault.hits += 1
                    if fault.times is not None:
                        fault.times -= 1
                    return fault
        return None
