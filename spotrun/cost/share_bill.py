"""A pack instance's bill seen from one share: the trial's part of everything the instance
accrues while it is on it (a sweep's pack, one GPU per trial)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from spotrun.cost.rules import Bill

Span = tuple[int, int, Fraction]  # [from, to) and the fraction of the instance's charges then


@dataclass(frozen=True)
class ShareBill(Bill):
    """One share's part of an instance several trials share (a sweep's pack, one GPU each).

    In each span the share pays `fraction` of everything the whole instance accrues then (its
    compute at the prices in force, its volumes); spotrun.cost.pack_shares makes the spans so
    that every second of the instance's bill is split equally between the trials on it in that
    second, and the shares' parts add up to the whole bill exactly. `usage` is the share (the
    trial's own time on the instance); `billed_s` its part of the instance's billed seconds.
    """

    whole: Bill | None = None
    spans: tuple[Span, ...] = ()

    def _part(self, until: Callable[[int], Fraction | None], at: int) -> Fraction | None:
        total = Fraction(0)
        for a, b, fraction in self.spans:
            if at <= a:
                break
            hi, lo = until(min(at, b)), until(a)
            if hi is None or lo is None:
                return None
            total += fraction * (hi - lo)
        return total

    def _whole(self) -> Bill:
        assert self.whole is not None
        return self.whole

    def compute_until(self, at: int) -> Fraction:
        part = self._part(self._whole().compute_until, at)
        assert part is not None
        return part

    def storage_until(self, at: int) -> Fraction:
        part = self._part(self._whole().storage_until, at)
        assert part is not None
        return part

    def on_demand_until(self, at: int) -> Fraction | None:
        return self._part(self._whole().on_demand_until, at)

    @property
    def billed_stop(self) -> int:
        return max((b for _, b, _ in self.spans), default=self.usage.start)

    @property
    def storage(self) -> Fraction:
        return self.storage_until(self.billed_stop)

    @property
    def on_demand(self) -> Fraction | None:
        whole = self._whole()
        return self._part(whole.on_demand_until, self.billed_stop)

    @property
    def on_demand_total(self) -> Fraction | None:
        compute = self.on_demand
        return None if compute is None else compute + self.storage

    @property
    def end(self) -> int:
        return self.billed_stop

    def change_points(self) -> list[int]:
        edges = {p for a, b, _ in self.spans for p in (a, b)}
        inner = {
            p for p in self._whole().change_points() if any(a <= p <= b for a, b, _ in self.spans)
        }
        return sorted(edges | inner)
