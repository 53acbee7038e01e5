"""The lab's two regions, each a VPC of its own on loopback.

EC2 is regional ("Regions and Zones" in the EC2 User Guide): instances, VPCs, subnets, images,
key pairs, security groups and spot prices belong to one region, and a call reaches the region
its endpoint and signature name. moto keeps a backend per region and picks it from the
signature, so the lab makes its network, image and image parameter in each region; the hosts
of both listen on loopback.

Each lab draws a /21 of 127/8 of its own (labs side by side never share addresses): the home
region's /22 with a /24 per zone, then the other region's. Under pytest-xdist each worker
takes its own second octets, so two workers' labs never draw the same range.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any

REGION = "us-east-1"  # the lab's home: spotrun's aws.region, the bucket's region
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
OTHER_REGION = "us-west-2"  # a second region, to launch, price and collect garbage in
OTHER_ZONES = ("us-west-2a", "us-west-2b")
REGIONS: dict[str, tuple[str, ...]] = {REGION: ZONES, OTHER_REGION: OTHER_ZONES}


def region_of_zone(zone: str) -> str:
    return zone[:-1]  # "us-west-2a" -> "us-west-2"


@dataclass(frozen=True)
class LabNetwork:
    region: str
    vpc_id: str
    cidr: str
    subnets: dict[str, str]  # zone -> subnet id


def _xdist_worker() -> tuple[int, int]:
    """(this worker's index, how many workers) under pytest-xdist; (0, 1) otherwise."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not name.startswith("gw") or not count.isdigit() or int(count) < 1:
        return 0, 1
    return int(name[2:]) % int(count), int(count)


def draw_block() -> tuple[int, int]:
    """(A, B) of this lab's 127.A.B.0/21: this worker's second octets, B a multiple of 8."""
    worker, workers = _xdist_worker()
    a = random.choice([n for n in range(16, 251) if n % workers == worker])
    return a, 8 * random.randint(1, 30)


def make_network(ec2: Any, region: str, a: int, b: int) -> LabNetwork:
    """A VPC 127.A.B.0/22 in `region` with a /24 per zone (moto does not hand a terminated
    instance's address out again: room for many)."""
    cidr = f"127.{a}.{b}.0/22"
    vpc_id = ec2.create_vpc(CidrBlock=cidr)["Vpc"]["VpcId"]
    subnets = {}
    for i, zone in enumerate(REGIONS[region]):
        subnet = ec2.create_subnet(
            VpcId=vpc_id, CidrBlock=f"127.{a}.{b + i}.0/24", AvailabilityZone=zone
        )
        subnets[zone] = subnet["Subnet"]["SubnetId"]
    return LabNetwork(region, vpc_id, cidr, subnets)
