"""Spot capacity per instance type and zone, as EC2's pools run out.

EC2 answers a RunInstances it cannot fill in the zone asked with InsufficientInstanceCapacity
(HTTP 500), naming the type and zone ("Troubleshoot Amazon EC2 instance launch issues",
"Insufficient instance capacity"; the error codes page): capacity is per type and per zone,
and another zone may have it. The lab gives every (type, zone) a pool of `default` live spot
instances (on by default; tests set one lower, 0 for none) and refuses a spot RunInstances
whose MinCount does not fit what is left. A call that fits is made whole (EC2's partial fills
are `Lab.limit_spot_capacity`).

The account's vCPU quotas (VcpuQuotas) come first, as on EC2: a RunInstances whose vCPUs,
with those of the region's running and pending instances under the same quota (spot and
on-demand apart), pass the quota's value is refused with MaxSpotInstanceCountExceeded for a
spot request ("Spot Instance quotas": "Max spot instance count exceeded") and
VcpuLimitExceeded for an on-demand one ("On-Demand Instance quotas"). The lab's own table of
which family counts against which quota is written here from AWS's "Amazon EC2 instance type
quotas" page, apart from spotrun's, so that a wrong mapping in spotrun shows.

Not modelled: capacity for on-demand, pools that change over time by themselves, and
InsufficientInstanceCapacity for stopped instances starting again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

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


# family -> (spot quota code, on-demand quota code), for the families the lab's market has
# and their neighbours; a new account's values (NEW_ACCOUNT) from the same page
QUOTA_CODES = {
    "standard": ("L-34B43A08", "L-1216C47A"),
    "g": ("L-3819A6DF", "L-DB2E81BA"),
    "p2-p4": ("L-7212CCBC", "L-417A185B"),
    "p5": ("L-C4BD4855", "L-417A185B"),
}
NEW_ACCOUNT = {
    "L-34B43A08": 5.0,
    "L-1216C47A": 5.0,
    "L-3819A6DF": 0.0,
    "L-DB2E81BA": 0.0,
    "L-7212CCBC": 0.0,
    "L-C4BD4855": 0.0,
    "L-417A185B": 0.0,
}
VCPU_LIMIT_MESSAGE = (
    "You have requested more vCPU capacity than your current vCPU limit of {limit:g} allows "
    "for the instance bucket that the specified instance type belongs to. Please visit "
    "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit."
)


def quota_code(instance_type: str, spot: bool) -> str | None:
    family = instance_type.split(".", 1)[0]
    found = re.match(r"([a-z]+)(\d*)", family)
    if found is None:
        return None
    letters, generation = found.groups()
    if letters == "p":
        group = {"2": "p2-p4", "3": "p2-p4", "4": "p2-p4", "5": "p5"}.get(generation)
    elif letters.startswith("g") or letters == "vt":
        group = "g"
    elif letters in ("c", "m", "r", "t"):
        group = "standard"
    else:
        group = None
    return QUOTA_CODES[group][0 if spot else 1] if group else None


class VcpuQuotas:
    """Quota code -> vCPUs that RunInstances enforces (unset: no limit)."""

    def __init__(
        self,
        ec2_of: Callable[[str], Any],
        live: Callable[[], list[dict[str, Any]]],
        region_of_subnet: Callable[[str], str | None],
    ) -> None:
        self.limits: dict[str, float] = {}
        self.ec2_of = ec2_of  # region -> an EC2 client straight to moto
        self.live = live  # the lab's running and pending instances, as EC2 describes them
        self.region_of_subnet = region_of_subnet
        self.refused: list[tuple[str, str]] = []  # (instance type, code) of each refusal
        self._vcpus: dict[tuple[str, str], int] = {}

    def vcpus_of(self, region: str, instance_type: str) -> int:
        key = (region, instance_type)
        if key not in self._vcpus:
            answer = self.ec2_of(region).describe_instance_types(InstanceTypes=[instance_type])
            (item,) = answer["InstanceTypes"]
            self._vcpus[key] = int(item["VCpuInfo"]["DefaultVCpus"])
        return self._vcpus[key]

    def refusal(self, params: dict[str, str]) -> tuple[int, bytes] | None:
        """EC2's answer when RunInstances would pass its quota, else None."""
        spot = params.get("InstanceMarketOptions.MarketType") == "spot"
        instance_type = params.get("InstanceType", "")
        code = quota_code(instance_type, spot)
        if code is None or code not in self.limits:
            return None
        subnet = params.get("SubnetId") or params.get("NetworkInterface.1.SubnetId") or ""
        region = self.region_of_subnet(subnet)
        if region is None:
            return None
        limit = self.limits[code]
        used = 0
        for item in self.live():
            kind = item["InstanceType"]
            in_region = item["Placement"]["AvailabilityZone"][:-1] == region  # us-east-1a
            held = (item.get("InstanceLifecycle") == "spot") == spot
            if in_region and held and quota_code(kind, spot) == code:
                used += self.vcpus_of(region, kind)
        wanted = int(params.get("MinCount", "1")) * self.vcpus_of(region, instance_type)
        if used + wanted <= limit:
            return None
        self.refused.append((instance_type, code))
        if spot:
            return Fault("RunInstances", "MaxSpotInstanceCountExceeded").render(params)
        message = VCPU_LIMIT_MESSAGE.format(limit=limit)
        return Fault("RunInstances", "VcpuLimitExceeded", message=message).render(params)
