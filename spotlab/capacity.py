"""Spot capacity per instance type and zone, as EC2's pools run out.

EC2 answers a RunInstances it cannot fill in the zone asked with InsufficientInstanceCapacity
(HTTP 500), naming the type and zone ("Troubleshoot Amazon EC2 instance launch issues",
"Insufficient instance capacity"; the error codes page): capacity is per type and per zone,
and another zone may have it. The lab gives every (type, zone) a pool of `default` live spot
instances (on by default; tests set one lower, 0 for none) and refuses a spot RunInstances
whose MinCount does not fit what is left. A call that fits is made whole (EC2's partial fills
are `Lab.limit_spot_capacity`).

Not modelled: capacity for on-demand, pools that change over time by themselves, and
InsufficientInstanceCapacity for stopped instances starting again.
"""

from __future__ import annotations

from collections.abc import Callable

from spotlab.front import Fault

LivePerPool = Callable[[str, str], int]  # (type, zone) -> live spot instances there now


class SpotPools:
    def __init__(self, default: int | None, zone_of_subnet: Callable[[str], str | None]) -> None:
        self.default = default  # None: no limit
        self.sizes: dict[tuple[str, str], int | None] = {}
        self.zone_of_subnet = zone_of_subnet
        self.live: LivePerPool = lambda instance_type, zone: 0
        self.refused: list[tuple[str, str]] = []  # (type, zone) of each call refused

    def size(self, instance_type: str, zone: str) -> int | None:
        return self.sizes.get((instance_type, zone), self.default)

    def refusal(self, params: dict[str, str]) -> tuple[int, bytes] | None:
        """EC2's answer when a spot RunInstances does not fit its pool, else None."""
        if params.get("InstanceMarketOptions.MarketType") != "spot":
            return None
        instance_type = params.get("InstanceType", "")
        zone = params.get("Placement.AvailabilityZone") or self.zone_of_subnet(
            params.get("SubnetId") or params.get("NetworkInterface.1.SubnetId") or ""
        )
        if not zone:
            return None
        size = self.size(instance_type, zone)
        wanted = int(params.get("MinCount", "1"))
        if size is None or self.live(instance_type, zone) + wanted <= size:
            return None
        self.refused.append((instance_type, zone))
        return Fault("RunInstances", "InsufficientInstanceCapacity", zone=zone).render(params)
