"""Offers from the EC2 API itself: instance types and their GPUs, spot prices per zone.

GPU types come from DescribeInstanceTypes (GpuInfo: count, model, memory), narrowed to NVIDIA
GPUs and to the image's architecture; spot prices from DescribeSpotPriceHistory, per zone;
on-demand prices for comparison. Only zones where spotrun can launch (a usable subnet) count.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from spotrun.cloud.aws.errors import aws_call
from spotrun.cloud.aws.prices import AwsPrices
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.base import Offer
from spotrun.cloud.ranking import RegionalOffers
from spotrun.core.config import Resources
from spotrun.core.errors import UsageError


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gb: float
    gpus: int
    gpu_model: str | None
    gpu_memory_gb: float | None
    gpu_maker: str | None
    architectures: tuple[str, ...]
    cluster_placement: bool = True  # PlacementGroupInfo lists the "cluster" strategy
    efa: bool = False  # NetworkInfo.EfaSupported

    @classmethod
    def from_api(cls, item: dict[str, Any]) -> InstanceType:
        gpu_info = item.get("GpuInfo") or {}
        gpus = gpu_info.get("Gpus") or []
        first = gpus[0] if gpus else {}
        memory_mib = (first.get("MemoryInfo") or {}).get("SizeInMiB")
        return cls(
            name=item["InstanceType"],
            vcpus=int(item.get("VCpuInfo", {}).get("DefaultVCpus", 0)),
            memory_gb=round(item.get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024, 1),
            gpus=sum(int(g.get("Count", 0)) for g in gpus),
            gpu_model=first.get("Name"),
            gpu_memory_gb=round(memory_mib / 1024, 1) if memory_mib else None,
            gpu_maker=first.get("Manufacturer"),
            architectures=tuple(item.get("ProcessorInfo", {}).get("SupportedArchitectures", [])),
            cluster_placement="cluster"
            in (item.get("PlacementGroupInfo") or {}).get("SupportedStrategies", []),
            efa=bool((item.get("NetworkInfo") or {}).get("EfaSupported")),
        )


class TypeCatalog:
    """DescribeInstanceTypes answers, kept a day under SPOTRUN_HOME/cache: instance types
    change with AWS launches, not by the minute (prices are always asked afresh)."""

    TTL_S = 24 * 3600.0

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir

    def _path(self, region: str, patterns: list[str]) -> Path:
        # "v2": entries from before placement and EFA were kept are asked again
        key = hashlib.sha256(json.dumps(["v2", region, sorted(patterns)]).encode()).hexdigest()[:16]
        return self.cache_dir / f"instance-types-{region}-{key}.json"

    def get(self, clients: AwsClients, region: str, patterns: list[str]) -> list[InstanceType]:
        path = self._path(region, patterns)
        try:
            data = json.loads(path.read_text())
            if time.time() - float(data["at"]) < self.TTL_S:
                return [
                    InstanceType(**{**item, "architectures": tuple(item["architectures"])})
                    for item in data["types"]
                ]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # no cache, or an unreadable one: ask EC2
        types = describe_types(clients, region, patterns)
        if types:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps({"at": time.time(), "types": [asdict(t) for t in types]}))
                os.replace(tmp, path)
            except OSError:
                pass  # only costs the next launch one call
        return types


def describe_types(clients: AwsClients, region: str, patterns: list[str]) -> list[InstanceType]:
    """Every instance type whose name matches one of `patterns` (EC2 wildcards)."""
    ec2 = clients.client("ec2", region)
    found: list[InstanceType] = []
    with aws_call("ec2", "DescribeInstanceTypes", region):
        pages = ec2.get_paginator("describe_instance_types").paginate(
            Filters=[{"Name": "instance-type", "Values": patterns}]
        )
        for page in pages:
            found.extend(InstanceType.from_api(item) for item in page.get("InstanceTypes", []))
    return found


def candidate_types(
    clients: AwsClients, region: str, resources: Resources, catalog: TypeCatalog
) -> list[InstanceType]:
    """The instance types that can run the job; a UsageError says why when none can."""
    settings = clients.settings
    arch = settings.architecture
    if resources.instance_type:
        named = catalog.get(clients, region, [resources.instance_type])
        if not named:
            raise UsageError(
                f"unknown instance type '{resources.instance_type}' in {region}",
                hint="see `spotrun prices` for the types on offer",
            )
        it = named[0]
        if resources.gpus and not it.gpus:
            raise UsageError(
                f"instance type {it.name} has no GPUs, but the run asks for {resources.gpus}",
                hint="pick a GPU type (see `spotrun prices`), or drop --instance-type",
            )
        if resources.gpus > it.gpus:
            raise UsageError(
                f"instance type {it.name} has {it.gpus} GPU(s), but the run asks for "
                f"{resources.gpus}"
            )
        if arch not in it.architectures:
            raise UsageError(
                f"instance type {it.name} does not run {arch} images",
                hint="set aws.architecture and an image built for it",
            )
        if resources.nodes > 1 and not it.cluster_placement:
            raise UsageError(
                f"instance type {it.name} cannot join a cluster placement group, which a "
                f"{resources.nodes}-node run needs (its nodes talk to each other every step)",
                hint="pick another type (see `spotrun prices`), or drop --nodes",
            )
        return [it]
    patterns = settings.gpu_instance_types if resources.gpus else settings.cpu_instance_types
    types = [t for t in catalog.get(clients, region, patterns) if arch in t.architectures]
    if resources.nodes > 1:  # a cluster's nodes share a cluster placement group
        types = [t for t in types if t.cluster_placement]
    if not resources.gpus:
        return [t for t in types if not t.gpus]
    # spotrun's images carry CUDA: other makers' accelerators cannot run its jobs.
    nvidia = [t for t in types if t.gpus and (t.gpu_maker or "").upper() == "NVIDIA"]
    if resources.gpu_model:
        models = sorted({t.gpu_model for t in nvidia if t.gpu_model})
        nvidia = [t for t in nvidia if (t.gpu_model or "").lower() == resources.gpu_model.lower()]
        if not nvidia:
            raise UsageError(
                f"no {arch} instance type in {region} has {resources.gpu_model} GPUs",
                hint=f"GPU models on offer: {', '.join(models)}",
            )
    fitting = [t for t in nvidia if t.gpus >= resources.gpus]
    if not fitting:
        counts = sorted({t.gpus for t in nvidia})
        raise UsageError(
            f"no instance type in {region} has {resources.gpus} GPUs"
            + (f" of model {resources.gpu_model}" if resources.gpu_model else ""),
            hint=f"GPU counts on offer: {', '.join(map(str, counts))}" if counts else None,
        )
    if resources.gpu_memory_gb:
        fitting = [t for t in fitting if (t.gpu_memory_gb or 0) >= resources.gpu_memory_gb]
        if not fitting:
            raise UsageError(
                f"no instance type in {region} has GPUs with {resources.gpu_memory_gb:g} GB"
            )
    return fitting


def build_offers(
    clients: AwsClients,
    prices: AwsPrices,
    region: str,
    zones: list[str],
    resources: Resources,
    catalog: TypeCatalog,
) -> list[Offer]:
    """Offers for every candidate type in every launchable zone, cheapest first."""
    types = candidate_types(clients, region, resources, catalog)
    if resources.zone:
        if resources.zone not in zones:
            raise UsageError(
                f"spotrun cannot launch in zone '{resources.zone}'",
                hint=f"zones with a subnet in {region}: {', '.join(zones) or 'none'}",
            )
        zones = [resources.zone]
    by_name = {t.name: t for t in types}
    spot = prices.current_spot_prices(region, list(by_name)) if resources.spot else {}
    on_demand = prices.on_demand_prices(region, list(by_name))
    offers = []
    for it in types:
        for zone in zones:
            spot_usd = spot.get((it.name, zone))
            if resources.spot and spot_usd is None:
                continue  # no spot market for this type in this zone
            offers.append(
                Offer(
                    provider="aws",
                    instance_type=it.name,
                    region=region,
                    zone=zone,
                    gpus=it.gpus,
                    gpu_model=it.gpu_model,
                    gpu_memory_gb=it.gpu_memory_gb,
                    vcpus=it.vcpus,
                    memory_gb=it.memory_gb,
                    spot_usd_per_hour=spot_usd,
                    on_demand_usd_per_hour=on_demand.get(it.name),
                    market="spot" if resources.spot else "on-demand",
                    cluster_placement=it.cluster_placement,
                    efa=it.efa,
                )
            )
    if not offers:
        names = ", ".join(sorted(by_name)[:6])
        raise UsageError(
            f"no spot price for {names} in {', '.join(zones)}: nothing to offer",
            hint="try another region or zone, or --instance-type",
        )
    return sorted(offers, key=lambda o: (o.usd_per_hour, o.gpus, o.instance_type, o.zone))


def launch_regions(resources: Resources, allowed: list[str], home: str) -> list[str]:
    """The regions a launch's offers come from: --region alone, else --regions (each one of
    aws.regions when that lists any), else aws.region."""
    if resources.region:
        return [resources.region]
    if not resources.regions:
        return [home]
    outside = [r for r in resources.regions if allowed and r not in allowed]
    if outside:
        raise UsageError(
            f"region {', '.join(outside)} is not in aws.regions ({', '.join(allowed)})",
            hint="add it to aws.regions in config.toml, or leave it out of --regions",
        )
    return list(dict.fromkeys(resources.regions))


def regional_offers(
    clients: AwsClients,
    prices: AwsPrices,
    regions: list[str],
    zones_of: Callable[[str], list[str]],
    resources: Resources,
    catalog: TypeCatalog,
) -> RegionalOffers:
    """Offers from every region; a region that has none that fit (it lacks the type, or has
    no spot price for it) is left out with a line, unless it is the only one."""
    if len(regions) == 1:
        region = regions[0]
        offers = build_offers(clients, prices, region, zones_of(region), resources, catalog)
        return RegionalOffers(offers, [], clients.settings.region)
    found: list[Offer] = []
    lines: list[str] = []
    refusals: list[UsageError] = []
    for region in regions:
        try:
            found += build_offers(clients, prices, region, zones_of(region), resources, catalog)
        except UsageError as exc:
            refusals.append(exc)
            lines.append(f"left out {region}: {exc.message}")
    if not found:
        raise UsageError(
            "no region of "
            + ", ".join(regions)
            + " has an offer: "
            + "; ".join(e.message for e in refusals)
        )
    found.sort(key=lambda o: (o.usd_per_hour, o.gpus, o.instance_type, o.zone))
    return RegionalOffers(found, lines, clients.settings.region)
