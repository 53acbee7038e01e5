"""What EC2 can fill in the lab: spot pools per type and zone, the account's vCPU quotas (both
refuse a RunInstances that does not fit, capacity.py), and partial fills (instances launched
past a limit end at once with Server.InsufficientInstanceCapacity)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from spotlab.capacity import NEW_ACCOUNT, SpotPools, VcpuQuotas
from spotlab.front import AwsFront
from spotlab.lab_interruptions import end_instance
from spotlab.regions import region_of_zone

Instances = Callable[..., list[dict[str, Any]]]  # Lab.instances
LIVE = ("pending", "running")


class LabCapacity:
    def __init__(
        self,
        front: AwsFront,
        client: Callable[..., Any],
        instances: Instances,
        zone_of_subnet: Callable[[str], str | None],
        region_of: Callable[[str], str],
        spot_pool: int | None,
    ) -> None:
        self.front = front
        self.client = client
        self.instances = instances
        self.zone_of_subnet = zone_of_subnet
        self.region_of = region_of
        # EC2's spot pools per (type, zone), `spot_pool` live instances each unless set:
        # a RunInstances that does not fit is refused, as EC2 does
        self.spot_pools = SpotPools(spot_pool, zone_of_subnet)
        self.spot_pools.live = self._live_spot
        # the account's vCPU quotas, checked before the pools as EC2 does
        self.vcpu_quotas = VcpuQuotas(
            lambda region: client("ec2", region),
            lambda: instances(states=LIVE),
            self._region_of_subnet,
        )
        # (type, zone) -> how many spot instances EC2 can fill there (partial fills)
        self.fill_limits: dict[tuple[str, str], int] = {}
        front.capacity_refusal = self._launch_refusal
        front.after_run_instances = self._fill

    def set_spot(self, instance_type: str, zone: str, count: int | None) -> None:
        """The spot pool of `instance_type` in `zone`: `count` live instances (0: none; None:
        no limit). A spot RunInstances that does not fit is answered with EC2's
        InsufficientInstanceCapacity, naming the type and zone; nothing is made."""
        self.spot_pools.sizes[(instance_type, zone)] = count

    def set_vcpu_quota(self, code: str, vcpus: float | None, *, readable: bool = True) -> None:
        """The account's vCPU quota `code` (Service Quotas' code): RunInstances refuses what
        would pass it, as EC2 does (None: no limit). `readable`: GetServiceQuota answers it
        (otherwise as for an account without servicequotas permissions)."""
        if vcpus is None:
            self.vcpu_quotas.limits.pop(code, None)
            self.front.quotas.values.pop(code, None)
            return
        self.vcpu_quotas.limits[code] = vcpus
        if readable:
            self.front.quotas.values[code] = vcpus
        else:
            self.front.quotas.values.pop(code, None)

    def new_account(self, *, readable: bool = False) -> None:
        """A new AWS account's vCPU quotas: 0 for every GPU family, spot and on-demand, 5 for
        Standard (AWS's instance type quotas page)."""
        for code, vcpus in NEW_ACCOUNT.items():
            self.set_vcpu_quota(code, vcpus, readable=readable)

    def limit_fill(self, instance_type: str, zone: str, count: int) -> None:
        """Spot capacity for only `count` live instances of the type in the zone: instances
        launched beyond it end at once with EC2's Server.InsufficientInstanceCapacity (a
        partial fill of a RunInstances call)."""
        self.fill_limits[(instance_type, zone)] = count

    def _launch_refusal(self, params: dict[str, str]) -> tuple[int, bytes] | None:
        return self.vcpu_quotas.refusal(params) or self.spot_pools.refusal(params)

    def _region_of_subnet(self, subnet_id: str) -> str | None:
        zone = self.zone_of_subnet(subnet_id)
        return region_of_zone(zone) if zone else None

    def _live_spot(self, instance_type: str, zone: str) -> int:
        return sum(
            1
            for i in self.instances(states=LIVE)
            if i.get("InstanceLifecycle") == "spot"
            and (i["InstanceType"], i["Placement"]["AvailabilityZone"]) == (instance_type, zone)
        )

    def _fill(self, answer: bytes) -> None:
        if not self.fill_limits:
            return
        for raw in re.findall(rb"<instanceId>(i-[0-9a-f]+)</instanceId>", answer):
            instance_id = raw.decode()
            region = self.region_of(instance_id)
            found = self.client("ec2", region).describe_instances(InstanceIds=[instance_id])
            (item,) = found["Reservations"][0]["Instances"]
            key = (item["InstanceType"], item["Placement"]["AvailabilityZone"])
            limit = self.fill_limits.get(key)
            if limit is None:
                continue
            live = [
                i
                for i in self.instances(states=LIVE)
                if (i["InstanceType"], i["Placement"]["AvailabilityZone"]) == key
            ]
            if len(live) > limit:
                end_instance(
                    region,
                    instance_id,
                    "Server.InsufficientInstanceCapacity",
                    "Server.InsufficientInstanceCapacity: Insufficient capacity",
                )
