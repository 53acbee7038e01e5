"""Offers screened against the account's quotas before a plan is made (clouds that can tell).

A cloud whose account has per-family quotas (AWS's vCPU quotas) declares ScreensQuotas: the
planner hands it the fitting offers and gets back those the quotas can hold, a line for each
quota that left offers out or could not be read, and, when nothing is left, the refusal to
raise (it names the quota and the request that raises it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from spotrun.cloud.base import Offer
from spotrun.core.errors import SpotrunError


@dataclass(frozen=True)
class QuotaScreen:
    kept: list[Offer]
    lines: list[str] = field(default_factory=list)  # what was left out and why, or not known
    refusal: SpotrunError | None = None  # raised when every offer was left out


@runtime_checkable
class ScreensQuotas(Protocol):
    """A cloud that knows which quota holds an offer, and how much of it is free."""

    def screen_quotas(self, offers: list[Offer], nodes: int) -> QuotaScreen:
        """The offers whose quota holds `nodes` instances of them beside what is in use."""
        ...

    def quota_name(self, offer: Offer) -> str | None:
        """The name of the quota the offer counts against (None: none known)."""
        ...
