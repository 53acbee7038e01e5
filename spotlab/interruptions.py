"""Spot interruptions as EC2 documents them, with the notice's two minutes scaled for tests.

Follows the EC2 User Guide's "Spot Instance interruption notices" (the instance-action
document: {"action": "terminate" | "stop" | "hibernate", "time": "...Z"}, two minutes before
EC2 stops or terminates; hibernation gets the notice but no two minutes, it begins at once) and "Behavior of Spot Instance interruptions" (what EC2 does is what the request
asked: InstanceInterruptionBehavior, terminate by default), and the API reference's
StateReason codes (Server.SpotInstanceTermination for a terminated instance,
Server.SpotInstanceShutdown for a stopped or hibernated one).

Not modelled: the persistent request that restarts a stopped instance when capacity returns
(spotrun asks for one-time requests only, which EC2 never restarts), hibernation's saved memory
(the lab's host simply ends, as a stopped one does), and rebalance recommendations' timing
relative to notices (a test announces them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone

EC2_NOTICE_S = 120.0  # EC2's notice: two minutes before it stops or terminates
ACTIONS = ("terminate", "stop", "hibernate")
# StateReason (code, message) per action once EC2 has acted
ENDED_AS = {
    "terminate": (
        "Server.SpotInstanceTermination",
        "Server.SpotInstanceTermination: Spot instance termination",
    ),
    "stop": (
        "Server.SpotInstanceShutdown",
        "Server.SpotInstanceShutdown: Spot instance shutdown",
    ),
    "hibernate": (
        "Server.SpotInstanceShutdown",
        "Server.SpotInstanceShutdown: Spot instance hibernation",
    ),
}


@dataclass(frozen=True)
class SpotRequest:
    """What a RunInstances asked of the spot market for its instances."""

    request_type: str  # "one-time" or "persistent"
    behaviour: str  # InstanceInterruptionBehavior: one of ACTIONS


def requested(params: dict[str, str]) -> SpotRequest | None:
    """The spot options of a RunInstances (query parameters), None for on-demand."""
    if params.get("InstanceMarketOptions.MarketType") != "spot":
        return None
    prefix = "InstanceMarketOptions.SpotOptions."
    return SpotRequest(
        params.get(prefix + "SpotInstanceType", "one-time"),
        params.get(prefix + "InstanceInterruptionBehavior", "terminate"),
    )


def made_ids(answer: bytes) -> list[str]:
    return [x.decode() for x in re.findall(rb"<instanceId>(i-[0-9a-f]+)</instanceId>", answer)]


def notice_before(action: str) -> float:
    """EC2 seconds from the notice to EC2 acting: two minutes, none for hibernation."""
    return 0.0 if action == "hibernate" else EC2_NOTICE_S


def notice_document(action: str, when: float) -> str:
    """The spot/instance-action document: what EC2 will do and when (second resolution)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown interruption action {action!r}; one of {ACTIONS}")
    stamp = datetime.fromtimestamp(when, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps({"action": action, "time": stamp})
