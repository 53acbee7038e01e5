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

Capacity weather (CapacitySchedule, Interruptions): pools that dry up and come back on a
schedule (each pool's size as steps over time since the schedule began, a step for every pool
at once too), and spot interruptions at a rate per instance-hour, as EC2's "Spot Instance
interruptions" page describes them (capacity taken back with two minutes' notice). Benches
replay a day of it in minutes: their schedule and rate are in the lab's compressed seconds.

Not modelled: capacity for on-demand, and InsufficientInstanceCapacity for stopped instances
starting again.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from spotlab.ec2faults import Fault

LivePerPool = Callable[[str, str], int]  # (type, zone) -> live spot instances there now
Pool = tuple[str, str]  # (instance type, zone)
Steps = Sequence[tuple[float, int | None]]  # (seconds since the schedule began, size from then)


class CapacitySchedule:
    """Spot pools over time: `steps[(type, zone)]` (or `steps[None]`, every pool not named)
    is [(at_s, size), ...]: from `at_s` seconds after the schedule began the pool holds `size`
    live instances (None: no limit). Before a pool's first step, and for a pool no step names,
    the lab's own size holds. Times are wall seconds on `clock` (time.monotonic)."""

    def __init__(
        self,
        steps: dict[Pool | None, Steps],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.steps = {pool: sorted(pool_steps) for pool, pool_steps in steps.items()}
        self.clock = clock
        self.began = clock()

    def elapsed_s(self) -> float:
        return self.clock() - self.began

    def size(self, pool: Pool) -> tuple[bool, int | None]:
        """(whether the schedule says, the size it says) for the pool now."""
        steps = self.steps.get(pool, self.steps.get(None, ()))
        now = self.elapsed_s()
        said: tuple[bool, int | None] = (False, None)
        for at_s, size in steps:
            if at_s > now:
                break
            said = (True, size)
        return said


class Interruptions:
    """Spot interruptions at `per_hour` per instance-hour (EC2 publishes each pool's rate as
    a band in the Spot Instance advisor: <5% to >20% a month, and much higher in a dry spell),
    with `hour_s` wall seconds to the hour (a bench's compression). Each live spot instance is
    interrupted at most once, through the lab's own `interrupt` (the notice, then the reclaim).
    Seeded: the same seed interrupts at the same draws."""

    def __init__(
        self,
        per_hour: float,
        live_spot: Callable[[], list[str]],
        interrupt: Callable[[str], None],
        *,
        hour_s: float = 3600.0,
        seed: int = 0,
        tick_s: float = 0.5,
    ) -> None:
        self.per_hour = per_hour
        self.live_spot = live_spot
        self.interrupt = interrupt
        self.hour_s = hour_s
        self.tick_s = tick_s
        self.rng = random.Random(seed)
        self.interrupted: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Interruptions:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        chance = min(1.0, self.per_hour * self.tick_s / self.hour_s)  # per tick, per instance
        while not self._stop.wait(self.tick_s):
            for instance_id in self.live_spot():
                if instance_id in self.interrupted or self.rng.random() >= chance:
                    continue
                self.interrupted.append(instance_id)
                self.interrupt(instance_id)


class SpotPools:
    def __init__(self, default: int | None, zone_of_subnet: Callable[[str], str | None]) -> None:
        self.default = default  # None: no limit
        self.sizes: dict[tuple[str, str], int | None] = {}
        self.zone_of_subnet = zone_of_subnet
        self.live: LivePerPool = lambda instance_type, zone: 0
        self.refused: list[tuple[str, str]] = []  # (type, zone) of each call refused
        self.schedule: CapacitySchedule | None = None  # capacity weather, over the sizes

    def size(self, instance_type: str, zone: str) -> int | None:
        if self.schedule is not None:
            said, size = self.schedule.size((instance_type, zone))
            if said:
                return size
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
