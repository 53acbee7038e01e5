"""Spot interruptions in the lab: the notice in the instance's IMDS, EC2 acting on it after the
notice's (scaled) two minutes, reclaims without notice, rebalance recommendations
(what EC2 documents: interruptions.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

from moto.ec2.models import ec2_backends
from moto.ec2.models.instances import StateReason

from spotlab.front import AwsFront
from spotlab.imds import Imds
from spotlab.interruptions import ENDED_AS, notice_before, notice_document
from spotlab.lab_iam import ACCOUNT


def end_instance(
    region: str, instance_id: str, code: str, message: str, *, stop: bool = False
) -> None:
    """EC2 ends the instance itself (terminated, or stopped), with the StateReason it gives."""
    backend = ec2_backends[ACCOUNT][region]
    instance = backend.get_instance(instance_id)
    if stop:
        backend.stop_instances([instance_id])
    else:
        backend.terminate_instances([instance_id])
    stamp = datetime.now(tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S GMT")
    instance._reason = f"Service initiated ({stamp})"
    instance.state_reason = StateReason(message, code)


class LabInterruptions:
    def __init__(
        self,
        front: AwsFront,
        imds_of: Callable[[str], Imds | None],
        region_of: Callable[[str], str],
        sync: Callable[[], None],
        time_scale: Callable[[], float],
    ) -> None:
        self.front = front
        self.imds_of = imds_of
        self.region_of = region_of
        self.sync = sync
        self.time_scale = time_scale

    def interrupt(
        self, instance_id: str, notice_s: float | None = None, action: str | None = None
    ) -> None:
        """A spot interruption: the notice in IMDS now, EC2 acting on it after `notice_s` (the
        two minutes scaled by the lab's time_scale unless given; none for hibernation, which
        EC2 begins at once). `action`: what EC2 does, by default what the instance's request
        asked (InstanceInterruptionBehavior; terminate)."""
        if action is None:
            spot = self.front.spot_requests.get(instance_id)
            action = spot.behaviour if spot is not None else "terminate"
        if notice_s is None:
            notice_s = notice_before(action) * self.time_scale()
        imds = self.imds_of(instance_id)
        now = imds.now() if imds is not None else time.time()  # in the instance's own frame
        document = notice_document(action, now + notice_s)
        if imds is not None:
            imds.announce("meta-data/spot/instance-action", document)
        timer = threading.Timer(notice_s, self.reclaim, args=(instance_id, action))
        timer.daemon = True
        timer.start()

    def reclaim(self, instance_id: str, action: str = "terminate") -> None:
        """EC2 takes the spot instance back now: terminated, or with action "stop" or
        "hibernate" stopped (its volumes kept, and billed), with EC2's spot StateReason; the
        host is killed either way."""
        code, message = ENDED_AS[action]
        stop = action != "terminate"
        end_instance(self.region_of(instance_id), instance_id, code, message, stop=stop)
        ending = "StopInstances" if stop else "TerminateInstances"
        self.front.consistency.ended_by(ending, [instance_id])
        self.sync()

    def rebalance(self, instance_id: str) -> None:
        """A rebalance recommendation in the instance's IMDS."""
        imds = self.imds_of(instance_id)
        if imds is not None:
            stamp = datetime.now(tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            imds.announce(
                "meta-data/events/recommendations/rebalance", json.dumps({"noticeTime": stamp})
            )
