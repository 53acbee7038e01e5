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
import uuid
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree

from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"

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


def zone_ids(region: str) -> dict[str, str]:
    """zone name -> Availability Zone ID in `region`, as moto's DescribeAvailabilityZones
    answers them (GetSpotPlacementScores speaks in IDs, which differ per account on AWS)."""
    return {z.name: z.zone_id for z in RegionsAndZonesBackend.zones.get(region, [])}


class PlacementScores:
    """GetSpotPlacementScores (moto lacks it), with the scores a test sets per (instance type,
    zone). Until a test sets one, the caller is refused as one without
    ec2:GetSpotPlacementScores is (UnauthorizedOperation), as many accounts' users are."""

    def __init__(self) -> None:
        self.scores: dict[tuple[str, str], int] = {}
        self.calls: list[dict[str, str]] = []

    def set(self, instance_type: str, zone: str, score: int) -> None:
        self.scores[(instance_type, zone)] = score

    def answer(self, params: dict[str, str]) -> tuple[int, bytes]:
        self.calls.append(params)
        if not self.scores:
            return 403, _error_xml(
                "UnauthorizedOperation",
                "You are not authorized to perform this operation (ec2:GetSpotPlacementScores).",
            )
        types = {v for k, v in params.items() if k.startswith("InstanceType.")}
        regions = {v for k, v in params.items() if k.startswith("RegionName.")}
        items = []
        for (instance_type, zone), score in sorted(self.scores.items()):
            region = region_of_zone(zone)
            if instance_type not in types or (regions and region not in regions):
                continue
            zone_id = zone_ids(region).get(zone, zone)
            items.append(
                f"<item><region>{region}</region><availabilityZoneId>{zone_id}"
                f"</availabilityZoneId><score>{score}</score></item>"
            )
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<GetSpotPlacementScoresResponse '
            f'xmlns="{EC2_NS}"><requestId>{uuid.uuid4()}</requestId><spotPlacementScoreSet>'
            f"{''.join(items)}</spotPlacementScoreSet></GetSpotPlacementScoresResponse>"
        )
        return 200, body.encode()


class TypeAvailability:
    """Instance types a region does not offer (a new type reaches some regions first): the
    region's DescribeInstanceTypes leaves them out, as EC2's does there."""

    def __init__(self) -> None:
        self.missing: set[tuple[str, str]] = set()  # (region, instance type)

    def remove(self, region: str, instance_type: str) -> None:
        self.missing.add((region, instance_type))

    def rewrite(self, region: str, answer: bytes) -> bytes:
        gone = {t for r, t in self.missing if r == region}
        if not gone:
            return answer
        root = ElementTree.fromstring(answer)
        namespace = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
        ElementTree.register_namespace("", namespace)
        prefix = f"{{{namespace}}}" if namespace else ""
        for listing in root.iter(f"{prefix}instanceTypeSet"):
            for item in list(listing):
                if item.findtext(f"{prefix}instanceType") in gone:
                    listing.remove(item)
        return bytes(ElementTree.tostring(root, encoding="utf-8", xml_declaration=True))


def _error_xml(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
        f"<Message>{message}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID>"
        "</Response>"
    ).encode()
