"""Prices from AWS: spot price histories (EC2) and on-demand prices (the Pricing API).

On-demand prices come from the Pricing API where the credentials may ask it, and otherwise from
the table spotrun ships (which states its date); `on_demand_source` says which answered.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from spotrun.cloud.aws.errors import aws_call
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.pricing_table import shipped_table

log = logging.getLogger(__name__)

LINUX = "Linux/UNIX"
PRICING_REGION = "us-east-1"  # the Pricing API answers from here for every region
CACHE_TTL_S = 7 * 24 * 3600
UNAVAILABLE_TTL_S = 24 * 3600  # how long a refusal of the Pricing API is believed


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def _is_linux(product: str) -> bool:
    return product.startswith(LINUX)


class AwsPrices:
    """Spot and on-demand prices for one account; a spotrun.cost.prices.PriceSource."""

    def __init__(self, clients: AwsClients, cache_dir: Path) -> None:
        self.clients = clients
        self.cache_dir = cache_dir
        self.settings = clients.settings
        self._pricing_ok = self.settings.pricing_api
        self._on_demand: dict[tuple[str, str], float | None] = {}
        self._lock = threading.Lock()
        self.on_demand_source = "none asked yet"

    # ------------------------------------------------------------------- spot
    def _history_pages(self, region: str, **params: object) -> Iterable[dict[str, object]]:
        ec2 = self.clients.client("ec2", region)
        with aws_call("ec2", "DescribeSpotPriceHistory", region):
            pages = ec2.get_paginator("describe_spot_price_history").paginate(
                ProductDescriptions=[LINUX], **params
            )
            for page in pages:
                yield from page.get("SpotPriceHistory", [])

    def spot_price_history(
        self, region: str, zone: str, instance_type: str, start: float, end: float
    ) -> list[tuple[float, float]]:
        points: dict[float, float] = {}
        for item in self._history_pages(
            region,
            AvailabilityZone=zone,
            InstanceTypes=[instance_type],
            StartTime=_utc(start),
            EndTime=_utc(end),
        ):
            if item.get("AvailabilityZone") != zone or item.get("InstanceType") != instance_type:
                continue
            if not _is_linux(str(item.get("ProductDescription", ""))):
                continue
            at = item["Timestamp"].timestamp()  # type: ignore[attr-defined]
            points[at] = float(str(item["SpotPrice"]))
        return sorted(points.items())

    def current_spot_prices(
        self, region: str, instance_types: list[str]
    ) -> dict[tuple[str, str], float]:
        """The price in force now for each (instance type, zone) that has one."""
        latest: dict[tuple[str, str], tuple[float, float]] = {}
        now = time.time()
        for chunk in _chunks(sorted(instance_types), 100):
            for item in self._history_pages(region, InstanceTypes=chunk, StartTime=_utc(now)):
                if not _is_linux(str(item.get("ProductDescription", ""))):
                    continue
                key = (str(item["InstanceType"]), str(item["AvailabilityZone"]))
                at = item["Timestamp"].timestamp()  # type: ignore[attr-defined]
                if key not in latest or at >= latest[key][0]:
                    latest[key] = (at, float(str(item["SpotPrice"])))
        return {key: price for key, (_, price) in latest.items()}

    # -------------------------------------------------------------- on-demand
    def on_demand_price(self, region: str, instance_type: str) -> float | None:
        return self.on_demand_prices(region, [instance_type]).get(instance_type)

    def on_demand_prices(self, region: str, instance_types: list[str]) -> dict[str, float | None]:
        """On-demand USD/h per type: cache, then the Pricing API, then the shipped table."""
        wanted = sorted(set(instance_types))
        cached = self._read_cache(region)
        if self._pricing_ok and self._pricing_refused_lately():
            self._pricing_ok = False
        with self._lock:
            for name in wanted:
                if (region, name) not in self._on_demand and name in cached:
                    self._on_demand[(region, name)] = cached[name]
            missing = [n for n in wanted if (region, n) not in self._on_demand]
        if missing and self._pricing_ok:
            asked = self._ask_pricing_api(region, missing)
            if asked is not None:
                self.on_demand_source = "the AWS Pricing API"
                with self._lock:
                    for name, usd in asked.items():
                        self._on_demand[(region, name)] = usd
                self._write_cache(region, {k: v for k, v in asked.items() if v is not None})
                missing = [n for n in missing if asked.get(n) is None]
        if missing:
            table = shipped_table()
            if self.on_demand_source == "none asked yet":
                self.on_demand_source = table.label
            with self._lock:
                for name in missing:
                    self._on_demand[(region, name)] = table.price(region, name)
        with self._lock:
            return {name: self._on_demand.get((region, name)) for name in wanted}

    def _ask_pricing_api(
        self, region: str, instance_types: list[str]
    ) -> dict[str, float | None] | None:
        """Prices from the Pricing API, or None when it cannot be asked (then it is not again)."""
        pricing = self.clients.client("pricing", PRICING_REGION, attempts=2)

        def one(instance_type: str) -> float | None:
            response = pricing.get_products(
                ServiceCode="AmazonEC2",
                FormatVersion="aws_v1",
                MaxResults=10,
                Filters=[
                    {"Type": "TERM_MATCH", "Field": field, "Value": value}
                    for field, value in (
                        ("instanceType", instance_type),
                        ("regionCode", region),
                        ("operatingSystem", "Linux"),
                        ("tenancy", "Shared"),
                        ("preInstalledSw", "NA"),
                        ("capacitystatus", "Used"),
                    )
                ],
            )
            return _on_demand_from_price_list(response.get("PriceList", []))

        try:
            first = one(instance_types[0])  # alone: a refusal then costs one call, not many
            with ThreadPoolExecutor(max_workers=min(8, len(instance_types))) as pool:
                results = [first, *pool.map(one, instance_types[1:])]
        except (ClientError, BotoCoreError) as exc:
            log.info("the Pricing API cannot be asked (%s); using the shipped table", exc)
            self._pricing_ok = False
            self._remember_refusal()
            return None
        return dict(zip(instance_types, results))

    def _refusal_path(self) -> Path:
        return self.cache_dir / "pricing-api-refused"

    def _pricing_refused_lately(self) -> bool:
        try:
            return time.time() - self._refusal_path().stat().st_mtime < UNAVAILABLE_TTL_S
        except OSError:
            return False

    def _remember_refusal(self) -> None:
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            self._refusal_path().touch()
        except OSError as exc:
            log.info("cannot write %s: %s", self._refusal_path(), exc)

    def _cache_path(self, region: str) -> Path:
        return self.cache_dir / f"on-demand-{region}.json"

    def _read_cache(self, region: str) -> dict[str, float]:
        try:
            data = json.loads(self._cache_path(region).read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or time.time() - float(data.get("at", 0)) > CACHE_TTL_S:
            return {}
        prices = data.get("prices", {})
        return {str(k): float(v) for k, v in prices.items()} if isinstance(prices, dict) else {}

    def _write_cache(self, region: str, prices: dict[str, float | None]) -> None:
        merged: dict[str, float | None] = {**self._read_cache(region), **prices}
        path = self._cache_path(region)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"at": time.time(), "prices": merged}))
            tmp.replace(path)
        except OSError as exc:  # a cache that cannot be written only costs a later lookup
            log.info("cannot write the price cache %s: %s", path, exc)


def _on_demand_from_price_list(price_list: list[str]) -> float | None:
    for entry in price_list:
        product = json.loads(entry) if isinstance(entry, str) else entry
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = float(dimension.get("pricePerUnit", {}).get("USD", "0") or 0)
                if usd > 0:
                    return usd
    return None


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
