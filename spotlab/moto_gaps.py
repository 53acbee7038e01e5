"""The AWS answers moto lacks, as the lab's front gives them: spot price histories a test sets
(DescribeSpotPriceHistory with EC2's time window and paging), the Pricing API's on-demand
prices, Service Quotas' vCPU quotas and the placement group calls."""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from xml.sax.saxutils import escape

from spotlab.ec2faults import Fault

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _parse_time(value: str | None) -> float | None:
    if not value:
        return None
    text = value.replace("Z", "+00:00")
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


class SpotPrices:
    """Price histories per (instance type, zone), served the way EC2 serves them."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str], list[tuple[float, float]]] = {}
        self.calls: list[dict[str, str]] = []
        self._lock = threading.Lock()

    def set(self, instance_type: str, zone: str, points: list[tuple[float, float]]) -> None:
        with self._lock:
            self.series[(instance_type, zone)] = sorted((float(t), float(p)) for t, p in points)

    @property
    def active(self) -> bool:
        return bool(self.series)

    def answer(self, params: dict[str, str], region: str) -> bytes:
        """EC2's answer in `region`: the histories of its zones only."""
        with self._lock:
            self.calls.append({**params, "Region": region})
            types = {v for k, v in params.items() if k.startswith("InstanceType.")}
            zone = params.get("AvailabilityZone")
            start = _parse_time(params.get("StartTime"))
            end = _parse_time(params.get("EndTime")) or time.time()
            rows: list[tuple[float, str, str, float]] = []
            for (itype, izone), points in self.series.items():
                if (types and itype not in types) or (zone and izone != zone):
                    continue
                if izone[:-1] != region:  # us-west-2a is us-west-2's
                    continue
                in_force = [p for p in points if start is not None and p[0] <= start]
                window = [p for p in points if (start is None or p[0] > start) and p[0] <= end]
                for at, price in in_force[-1:] + window:
                    rows.append((at, itype, izone, price))
        rows.sort(key=lambda r: (-r[0], r[1], r[2]))  # newest first, as EC2 answers
        size = int(params.get("MaxResults", "1000"))
        offset = int(params.get("NextToken", "0") or 0)
        page = rows[offset : offset + size]
        items = "".join(
            f"<item><instanceType>{itype}</instanceType>"
            f"<productDescription>Linux/UNIX</productDescription>"
            f"<spotPrice>{price:.6f}</spotPrice><timestamp>{_iso(at)}</timestamp>"
            f"<availabilityZone>{izone}</availabilityZone></item>"
            for at, itype, izone, price in page
        )
        token = (
            f"<nextToken>{offset + size}</nextToken>"
            if offset + size < len(rows)
            else "<nextToken/>"
        )
        return (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<DescribeSpotPriceHistoryResponse xmlns="{EC2_NS}">'
            f"<requestId>{uuid.uuid4()}</requestId><spotPriceHistorySet>{items}</spotPriceHistorySet>"
            f"{token}</DescribeSpotPriceHistoryResponse>"
        ).encode()


class OnDemandPrices:
    """The Pricing API's GetProducts, for the types a test gave prices."""

    def __init__(self) -> None:
        self.prices: dict[tuple[str, str], float] = {}
        self.calls = 0

    def answer(self, body: bytes) -> tuple[int, bytes]:
        self.calls += 1
        if not self.prices:
            error = {
                "__type": "AccessDeniedException",
                "message": "User is not authorized to perform: pricing:GetProducts",
            }
            return 400, json.dumps(error).encode()
        request = json.loads(body or b"{}")
        fields = {f["Field"]: f["Value"] for f in request.get("Filters", [])}
        key = (fields.get("regionCode", ""), fields.get("instanceType", ""))
        price_list = []
        if key in self.prices:
            product = {
                "product": {"attributes": {"instanceType": key[1], "regionCode": key[0]}},
                "terms": {
                    "OnDemand": {
                        "SKU.JRTCKXETXF": {
                            "priceDimensions": {
                                "SKU.JRTCKXETXF.6YS6EN2CT7": {
                                    "unit": "Hrs",
                                    "pricePerUnit": {"USD": f"{self.prices[key]:.6f}"},
                                }
                            }
                        }
                    }
                },
            }
            price_list.append(json.dumps(product))
        return 200, json.dumps({"FormatVersion": "aws_v1", "PriceList": price_list}).encode()


class Quotas:
    """Service Quotas' GetServiceQuota for the EC2 quotas a test set (code -> value); others
    answered as an account without servicequotas permissions is."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def answer(self, target: str, body: bytes) -> tuple[int, bytes]:
        request = json.loads(body or b"{}")
        code = str(request.get("QuotaCode", ""))
        if not target.endswith(".GetServiceQuota") or code not in self.values:
            error = {
                "__type": "AccessDeniedException",
                "message": "User is not authorized to perform: servicequotas:GetServiceQuota",
            }
            return 400, json.dumps(error).encode()
        quota = {"ServiceCode": "ec2", "QuotaCode": code, "Value": self.values[code]}
        return 200, json.dumps({"Quota": quota}).encode()


@dataclass(frozen=True)
class PlacementGroup:
    region: str
    strategy: str
    group_id: str
    tags: dict[str, str]


class PlacementGroups:
    """EC2's placement group calls, which moto lacks: groups by name (each in its region), with
    strategy and tags."""

    def __init__(self) -> None:
        self.groups: dict[str, PlacementGroup] = {}
        self.deleted: list[str] = []
        self._lock = threading.Lock()

    def _error(self, code: str, message: str) -> tuple[int, bytes]:
        return Fault("", code, message=message).render({})

    def known(self, name: str, region: str) -> bool:
        group = self.groups.get(name)
        return group is not None and group.region == region

    def answer(self, action: str, params: dict[str, str], region: str) -> tuple[int, bytes]:
        name = params.get("GroupName", "")
        with self._lock:
            if action == "CreatePlacementGroup":
                if name in self.groups:
                    return self._error(
                        "InvalidPlacementGroup.Duplicate", f"The placement group '{name}' is in use"
                    )
                tags: dict[str, str] = {}
                for key, value in params.items():  # TagSpecification.1.Tag.N.Key / .Value
                    if key.startswith("TagSpecification.1.Tag.") and key.endswith(".Key"):
                        tags[value] = params.get(key[:-4] + ".Value", "")
                self.groups[name] = PlacementGroup(
                    region=region,
                    strategy=params.get("Strategy", "cluster"),
                    group_id=f"pg-{uuid.uuid4().hex[:17]}",
                    tags=tags,
                )
                return 200, self._xml(action, self._item(name, "placementGroup"))
            if action == "DeletePlacementGroup":
                if not self.known(name, region):
                    return self._error(
                        "InvalidPlacementGroup.Unknown", f"The placement group '{name}' is unknown"
                    )
                del self.groups[name]
                self.deleted.append(name)
                return 200, self._xml(action, "<return>true</return>")
            # DescribePlacementGroups, with tag:KEY filters
            wanted: dict[str, str] = {}
            for key, value in params.items():
                if key.startswith("Filter.") and key.endswith(".Name") and value.startswith("tag:"):
                    wanted[value[4:]] = params.get(key[:-5] + ".Value.1", "")
            items = "".join(
                self._item(n, "item")
                for n, g in self.groups.items()
                if g.region == region and all(g.tags.get(k) == v for k, v in wanted.items())
            )
            return 200, self._xml(action, f"<placementGroupSet>{items}</placementGroupSet>")

    def _item(self, name: str, tag: str) -> str:
        group = self.groups[name]
        tags = "".join(
            f"<item><key>{escape(k)}</key><value>{escape(v)}</value></item>"
            for k, v in group.tags.items()
        )
        return (
            f"<{tag}><groupName>{escape(name)}</groupName><state>available</state>"
            f"<strategy>{group.strategy}</strategy><groupId>{group.group_id}</groupId>"
            f"<tagSet>{tags}</tagSet></{tag}>"
        )

    def _xml(self, action: str, inner: str) -> bytes:
        return (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="{EC2_NS}">'
            f"<requestId>{uuid.uuid4()}</requestId>{inner}</{action}Response>"
        ).encode()
