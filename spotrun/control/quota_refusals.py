"""The account's vCPU quotas refusing a run's offers, as the controller asks offer by offer.

A quota refusal (EC2's MaxSpotInstanceCountExceeded or VcpuLimitExceeded) is no capacity
weather: every offer under the same quota is refused too, so those are not asked, while offers
under another quota may still fill. When none fills, the run fails with the first refusal's
message and its hint, the exact request that raises that quota.
"""

from __future__ import annotations

from spotrun.cloud.base import Offer, Provider
from spotrun.cloud.quota_screen import ScreensQuotas
from spotrun.core.errors import VcpuQuotaError


class QuotaRefusals:
    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self.refused: list[VcpuQuotaError] = []

    def covers(self, offer: Offer) -> bool:
        """Whether a quota that already refused this run holds `offer` too."""
        if not self.refused or not isinstance(self.provider, ScreensQuotas):
            return False
        return self.provider.quota_name(offer) in {r.quota for r in self.refused}

    def add(self, refusal: VcpuQuotaError) -> None:
        self.refused.append(refusal)

    def failure(self, tried: list[str]) -> VcpuQuotaError | None:
        """The run's error when no offer filled and a quota refused one; else None."""
        if not self.refused:
            return None
        first = self.refused[0]
        others = [r.quota for r in self.refused[1:] if r.quota != first.quota]
        message = first.message
        if others:
            message += f"; also refused by the quota(s) {', '.join(sorted(set(others)))}"
        if tried:
            message += "; other offers: " + "; ".join(tried)
        return VcpuQuotaError(message, quota=first.quota, hint=first.hint)
