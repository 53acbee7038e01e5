"""EBS storage prices spotrun bills volumes at: a small shipped table, dated, per region.

AWS list prices for gp3 storage in USD per GB-month (aws.amazon.com/ebs/pricing). The gp3 storage
price has not changed in these regions since gp3 launched in December 2020. Baseline gp3
performance (3,000 IOPS, 125 MB/s) is free, and spotrun provisions no more, so storage is the
whole volume charge. A region or volume type missing here is an error, never a zero.
"""

from __future__ import annotations

from fractions import Fraction

from spotrun.core.errors import PricingError

PRICES_AS_OF = "2025-06"

GB_MONTH_USD: dict[tuple[str, str], Fraction] = {
    ("us-east-1", "gp3"): Fraction("0.08"),
    ("us-east-2", "gp3"): Fraction("0.08"),
    ("us-west-2", "gp3"): Fraction("0.08"),
    ("us-west-1", "gp3"): Fraction("0.096"),
    ("eu-west-1", "gp3"): Fraction("0.088"),
    ("eu-central-1", "gp3"): Fraction("0.0952"),
    ("ap-northeast-1", "gp3"): Fraction("0.096"),
}


def gb_month_usd(region: str, volume_type: str) -> Fraction:
    try:
        return GB_MONTH_USD[(region, volume_type)]
    except KeyError:
        known = ", ".join(sorted({r for r, t in GB_MONTH_USD if t == volume_type})) or "none"
        raise PricingError(
            f"no {volume_type} storage price for region {region} in spotrun's EBS table "
            f"(prices as of {PRICES_AS_OF}; regions with a {volume_type} price: {known})",
            hint="add the region's price per GB-month to spotrun/cost/ebs_prices.py",
        ) from None
