"""`spotrun prices`: the offers a launch would choose from, cheapest first; without credentials,
the shipped, dated catalog's GPU types instead (and it says so)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spotrun.cloud import get_provider
from spotrun.cloud.base import Offer
from spotrun.cloud.by_name import gpu_type_patterns
from spotrun.cloud.capabilities import NamesItsPrices
from spotrun.cloud.gpu_catalog import shipped_catalog
from spotrun.cloud.plan import make_plan
from spotrun.cloud.pricing_table import shipped_table
from spotrun.core.config import CloudName, Resources, Settings
from spotrun.core.errors import CredentialsError, UsageError
from spotrun.core.launch_request import LaunchRequest, as_request


@dataclass(frozen=True)
class PriceTable:
    offers: list[Offer]  # cheapest first
    on_demand_source: str  # where the on-demand column came from
    spot_source: str = "EC2's current prices"
    offline: str | None = None  # why the prices are the shipped catalog's, not the cloud's


def prices(
    settings: Settings,
    cloud: CloudName = "aws",
    resources: LaunchRequest | Mapping[str, Any] | None = None,
) -> PriceTable:
    """The offers a launch with these resources would choose from, cheapest first; without
    credentials, the GPU types of spotrun's shipped, dated catalog instead (and it says so).
    `resources`: a LaunchRequest, or its resource keys (the flags `spotrun prices` was given)."""
    wanted = as_request(resources).resources_over(Resources())
    try:  # a profile that does not exist fails as the provider is made
        provider = get_provider(cloud, settings)
        offers = make_plan(wanted, provider.offers(wanted), limit=None).offers
    except CredentialsError as exc:
        return catalog_prices(settings, wanted, why=exc.message)
    source = provider.on_demand_source if isinstance(provider, NamesItsPrices) else "the cloud"
    return PriceTable(offers, source)


def catalog_prices(settings: Settings, wanted: Resources, *, why: str) -> PriceTable:
    """The shipped catalog's GPU offers that fit `wanted`: known spot prices first, cheapest
    first, then the types it has only on-demand prices for."""
    if not wanted.gpus:
        raise UsageError(
            f"{why}, and spotrun's shipped catalog lists GPU types only",
            hint="ask for GPUs (--gpus 1), or give AWS credentials to see CPU types",
        )
    catalog = shipped_catalog()
    if wanted.region and wanted.region != catalog.region:
        raise UsageError(
            f"{why}, and spotrun's shipped catalog holds {catalog.region} prices only",
            hint=f"drop --region to see {catalog.region}, or give AWS credentials",
        )
    # make_plan keeps what fits, or says why nothing does
    fitting = make_plan(wanted, catalog.matching(gpu_type_patterns(settings)), limit=None)
    offers = sorted(
        fitting.offers,
        key=lambda o: (
            o.spot_usd_per_hour is None,
            o.spot_usd_per_hour or o.on_demand_usd_per_hour or float("inf"),
            o.gpus,
            o.instance_type,
        ),
    )
    return PriceTable(
        offers,
        on_demand_source=shipped_table().label,
        spot_source=f"typical prices from {catalog.label}",
        offline=f"{why}: these are spotrun's shipped prices, not live ones",
    )
