"""The GPU instance types spotrun ships a dated price catalog of, for `spotrun prices` without
AWS credentials (spotrun/cloud/gpu_catalog.json states its date, region and sources).

Its offers are the types a launch would search (aws.gpu_instance_types) with their GPUs, the
shipped on-demand price and, where the catalog has one, a typical spot price; they carry no zone,
since no zone was asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fnmatch import fnmatch
from functools import lru_cache
from importlib import resources

from spotrun.cloud.base import Offer
from spotrun.cloud.pricing_table import shipped_table

ANY_ZONE = "any"


@dataclass(frozen=True)
class GpuCatalog:
    as_of: str
    region: str
    source: str
    offers: list[Offer]

    @property
    def label(self) -> str:
        return f"spotrun's shipped catalog of {self.as_of} ({self.region})"

    def matching(self, patterns: list[str]) -> list[Offer]:
        """The catalog's offers whose type matches one of `patterns` (e.g. "g*", "p5.*")."""
        return [o for o in self.offers if any(fnmatch(o.instance_type, p) for p in patterns)]


@lru_cache(maxsize=1)
def shipped_catalog() -> GpuCatalog:
    data = json.loads(resources.files("spotrun.cloud").joinpath("gpu_catalog.json").read_text())
    region = str(data["region"])
    on_demand = shipped_table()
    offers = []
    for name, row in data["types"].items():
        spot = row.get("spot_usd_per_hour")
        offers.append(
            Offer(
                provider="aws",
                instance_type=name,
                region=region,
                zone=ANY_ZONE,
                gpus=int(row["gpus"]),
                gpu_model=str(row["gpu_model"]),
                gpu_memory_gb=float(row["gpu_memory_gb"]),
                vcpus=int(row["vcpus"]),
                memory_gb=float(row["memory_gb"]),
                spot_usd_per_hour=None if spot is None else float(spot),
                on_demand_usd_per_hour=on_demand.price(region, name),
            )
        )
    return GpuCatalog(str(data["as_of"]), region, str(data["source"]), offers)
