"""Faults a test injects into the calls spotrun makes: EC2 and S3 errors, answers delayed or
held until the test releases them (the front carries them out, ec2faults.py, s3faults.py)."""

from __future__ import annotations

from collections.abc import Callable

from spotlab.ec2faults import Fault, Hold
from spotlab.front import AwsFront
from spotlab.s3faults import S3Fault


class LabFaults:
    def __init__(self, front: AwsFront, subnet_of_zone: Callable[[str], str]) -> None:
        self.front = front
        self.subnet_of_zone = subnet_of_zone

    def ec2(
        self,
        action: str,
        code: str,
        *,
        times: int | None = 1,
        zone: str | None = None,
        instance_type: str | None = None,
        message: str | None = None,
        status: int | None = None,
    ) -> Fault:
        """Answer the next `times` EC2 `action` calls (None: all) with error `code`; `zone`,
        `instance_type`: only calls that launch there, or that type."""
        match = {}
        if zone is not None:
            match["SubnetId"] = self.subnet_of_zone(zone)
        if instance_type is not None:
            match["InstanceType"] = instance_type
        return self.front.faults.add(
            action, code, times=times, message=message, status=status, zone=zone, match=match
        )

    def s3(self, operation: str, code: str = "SlowDown", *, times: int = 1) -> S3Fault:
        """Answer the next `times` S3 `operation` calls (PutObject, UploadPart, GetObject...)
        with S3's `code`: SlowDown (503) or InternalError (500)."""
        return self.front.s3_faults.add(operation, code, times=times)

    def delay(self, action: str, seconds: float, times: int = 1) -> None:
        """Let EC2 act on `action`, but hold its answer `seconds` (the next `times` calls).

        While the answer is held the instances exist and the caller has not heard of them:
        kill the caller then, and it is the crash a reconciling launch must survive.
        """
        self.front.delays[action] = [seconds, times]

    def hold(self, action: str, *, forwarded: bool = False) -> Hold:
        """Hold the next EC2 `action` call until `.release()` (see ec2faults.Hold): a fault can
        be timed to land while spotrun waits on that call."""
        return self.front.holds.add(action, forwarded=forwarded)
