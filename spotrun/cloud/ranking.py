"""Offers ranked by what finishing the job is expected to cost, not by price alone.

A spot pool (an instance type in a zone) that keeps reclaiming its instances costs more than its
price: each interruption loses the work done since the last checkpoint and the restart on new
capacity, both paid at the pool's price. So each offer gets

    expected $/h = price x (1 + rate x (LOST_WORK_H + RESTART_H))

where `rate` is the pool's interruptions per hour of running, estimated from two signals:

- EC2's spot placement score (1-10, GetSpotPlacementScores): how likely a spot request there is
  to be filled now. It is no interruption rate, but pools that are hard to fill are the ones
  reclaiming capacity, so it sets the prior rate: a score of 10 maps to one reclaim in about
  500 hours of running (SCORE_10_RATE), a score of 1 to one in 20 hours (SCORE_1_RATE, what
  busy GPU pools show), geometric between (a score is a ranking, each step down multiplies the
  rate by the same factor, about 1.43). Without a score the prior is that of a middling 5.
- the ledger's own history of the pool: reclaims seen over hours run there. It updates the
  prior as a Gamma-Poisson estimate, the prior counting as PRIOR_HOURS of running:
  rate = (reclaims + prior_rate x PRIOR_HOURS) / (hours + PRIOR_HOURS), so a few hours of
  history nudge the prior and a long history outweighs it.

An offer outside the region its data set lives in also pays to move the data set there once
(cross-region transfer, a price per GB). A one-time charge is compared with hourly prices by
spreading it over the run's expected hours (`expected_hours`: the recipe's stated time, else
--max-hours, else one hour), so on a long run a small data set barely counts and on a short one
a big data set keeps the run beside it.

Pure functions: the provider hands in scores, the ledger its history, the launch its data set.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from spotrun.cloud.base import Offer
from spotrun.core.money import show_usd, show_usd_per_hour

if TYPE_CHECKING:
    from spotrun.core.config import Resources

# What one interruption costs, in hours at the pool's price: the work since the last
# checkpoint (half of an hour-long checkpoint interval, on average) and the restart (a new
# instance booted, provisioned and handed the checkpoint: about 12 minutes).
LOST_WORK_H = 0.5
RESTART_H = 0.2
INTERRUPTION_COST_H = LOST_WORK_H + RESTART_H

SCORE_10_RATE = 1 / 500  # reclaims per hour of running, at placement score 10
SCORE_1_RATE = 1 / 20  # and at score 1
UNSCORED = 5  # the score assumed where EC2 gave none (not permitted, or not asked)
PRIOR_HOURS = 10.0  # how many hours of history the score's prior weighs as

Pool = tuple[str, str]  # (instance type, zone)

# AWS's "Amazon S3 pricing" page, Data Transfer, "Data Transfer OUT From Amazon S3 To" another
# AWS Region: $0.02 per GB between most regions (us-east-1 <-> us-east-2 is $0.01: not told apart).
# Here, below cost/, because ranking a launch's offers weighs it too (spotrun.cloud.plan).
CROSS_REGION_USD_PER_GB = Fraction(2, 100)
GB = 10**9  # AWS bills data transfer per decimal gigabyte


@dataclass(frozen=True)
class PoolHistory:
    """What this ledger saw of one pool: spot reclaims over the hours its instances ran."""

    reclaims: int
    hours: float


@dataclass(frozen=True)
class DataSite:
    """Where a run's data set lives: its bucket's region, and its size (None: no manifest)."""

    uri: str
    region: str
    size_bytes: int | None


@dataclass(frozen=True)
class RunHours:
    """The hours a run is expected to take, and what that rests on (said in the plan)."""

    hours: float
    basis: str


@dataclass(frozen=True)
class DataTransfer:
    """What reaching the data set from another region costs: `usd` once (None: its size is
    unknown), spread over the run's expected hours."""

    site: DataSite
    usd: float | None
    hours: RunHours

    @property
    def usd_per_hour(self) -> float:
        return 0.0 if self.usd is None else spread_over(self.usd, self.hours.hours)

    def applies_to(self, offer: Offer) -> bool:
        return offer.region != self.site.region

    def words(self) -> str:
        usd = "size unknown" if self.usd is None else f"{show_usd(self.usd)} once"
        return (
            f"moving {self.site.uri} from {self.site.region} ({usd}, "
            f"over {self.hours.hours:g} h: {self.hours.basis})"
        )


@dataclass(frozen=True)
class RankedOffer:
    offer: Offer
    rate_per_hour: float  # expected interruptions per hour of running
    expected_usd_per_hour: float
    score: int | None
    history: PoolHistory | None
    transfer_usd_per_hour: float = 0.0  # the data set's transfer, spread (0 in its region)


@dataclass(frozen=True)
class RegionalOffers:
    """Offers gathered from several regions, with a line for each region left out."""

    offers: list[Offer]
    lines: list[str] = field(default_factory=list)
    home_region: str | None = None  # where the run's checkpoints live (its bucket's region)


@runtime_checkable
class OffersAcrossRegions(Protocol):
    """A cloud whose offers may come from several regions (`--regions`)."""

    def regional_offers(self, resources: Resources) -> RegionalOffers: ...


@runtime_checkable
class ScoresPools(Protocol):
    """A cloud that says how likely spot capacity is in each pool (EC2's placement scores)."""

    def placement_scores(self, offers: Sequence[Offer]) -> Mapping[Pool, int]:
        """Scores 1-10 per (instance type, zone) of these offers; pools it cannot score are
        left out (not permitted, or no answer)."""
        ...


def score_rate(score: int | None) -> float:
    """Interruptions per hour a placement score stands for (module docstring: the mapping)."""
    clamped = min(10, max(1, UNSCORED if score is None else score))
    step = (10 - clamped) / 9  # 0 at score 10, 1 at score 1
    return float(SCORE_10_RATE * (SCORE_1_RATE / SCORE_10_RATE) ** step)


def interruption_rate(score: int | None, history: PoolHistory | None) -> float:
    """The pool's interruptions per hour: the score's prior updated by the ledger's history."""
    prior = score_rate(score)
    if history is None:
        return prior
    hours = max(0.0, history.hours)
    return (max(0, history.reclaims) + prior * PRIOR_HOURS) / (hours + PRIOR_HOURS)


def expected_usd_per_hour(price: float, rate: float) -> float:
    """Price per hour of progress: the price plus what interruptions cost at that rate."""
    if math.isinf(price):
        return price
    return price * (1.0 + rate * INTERRUPTION_COST_H)


def expected_hours(stated_hours: float | None, max_hours: float | None) -> RunHours:
    """The hours a one-time charge is spread over: the recipe's stated time, else the run's
    --max-hours cap, else one hour (a guess the plan says it made)."""
    if stated_hours is not None and stated_hours > 0:
        return RunHours(stated_hours, "the recipe's stated time")
    if max_hours is not None and max_hours > 0:
        return RunHours(max_hours, "--max-hours")
    return RunHours(1.0, "no time stated, 1 h assumed")


def spread_over(usd_once: float, hours: float) -> float:
    """A one-time charge as dollars per hour of a run expected to take `hours`."""
    return usd_once / max(hours, 1 / 60)  # a minute at least: no division by ~0


def rank(
    offers: Iterable[Offer],
    scores: Mapping[Pool, int] | None = None,
    history: Mapping[Pool, PoolHistory] | None = None,
    home_region: str | None = None,
    data: DataTransfer | None = None,
) -> list[RankedOffer]:
    """The offers by expected cost to finish, lowest first (an offer outside the data set's
    region pays its transfer, spread over the run's hours); at equal cost the data set's
    region first, then the home region's (its checkpoints need no transfer), then fewer GPUs,
    then a stable name order."""
    scores = scores or {}
    history = history or {}
    ranked = []
    for offer in offers:
        pool = (offer.instance_type, offer.zone)
        seen = history.get(pool)
        score = scores.get(pool)
        rate = interruption_rate(score, seen)
        transfer = data.usd_per_hour if data is not None and data.applies_to(offer) else 0.0
        expected = expected_usd_per_hour(offer.usd_per_hour, rate) + transfer
        ranked.append(RankedOffer(offer, rate, expected, score, seen, transfer))
    return sorted(
        ranked,
        key=lambda r: (
            round(r.expected_usd_per_hour, 9),
            data is not None and data.applies_to(r.offer),
            r.offer.region != home_region,
            r.offer.gpus,
            r.offer.instance_type,
            r.offer.zone,
        ),
    )


def why(chosen: RankedOffer, data: DataTransfer | None = None) -> str:
    """The plan's words for its choice: price, expected cost, what the rate rests on, and the
    data set's transfer it pays (or that it runs where the data set lives)."""
    offer = chosen.offer
    signals = [f"score {chosen.score}" if chosen.score is not None else "no placement score"]
    seen = chosen.history
    if seen is None:
        signals.append("no reclaims recorded here")
    else:
        signals.append(f"{seen.reclaims} reclaim(s) in {seen.hours:.0f} h here")
    line = (
        f"chose {offer.instance_type} in {offer.zone}: {show_usd_per_hour(offer.usd_per_hour)}, "
        f"expected {show_usd_per_hour(chosen.expected_usd_per_hour)} with interruptions "
        f"({', '.join(signals)})"
    )
    if data is None or data.usd is None:
        return line
    if data.applies_to(offer):
        return f"{line}, and {show_usd_per_hour(chosen.transfer_usd_per_hour)} for {data.words()}"
    return f"{line}, in {data.site.region} where its data set {data.site.uri} lives"


def data_unknown(data: DataTransfer | None, ranked: Sequence[RankedOffer]) -> list[str]:
    """A line when the data set's size is unknown and offers outside its region were ranked
    without its transfer."""
    if data is None or data.usd is not None:
        return []
    if not any(data.applies_to(r.offer) for r in ranked):
        return []
    return [
        f"the data set {data.site.uri} lives in {data.site.region}; its size is unknown (no "
        "manifest: push it with spotrun data push), so offers elsewhere were ranked without "
        "its transfer"
    ]


def passed_over(
    chosen: RankedOffer, ranked: Sequence[RankedOffer], data: DataTransfer | None = None
) -> list[str]:
    """A line for each cheaper offer ranked behind the chosen one, saying why: the data set's
    transfer when without it the offer would have come first, else its interruptions."""
    lines = []
    for other in ranked:
        if other.offer.usd_per_hour >= chosen.offer.usd_per_hour:
            continue
        offer = other.offer
        if (
            data is not None
            and other.transfer_usd_per_hour > chosen.transfer_usd_per_hour
            and (
                other.expected_usd_per_hour - other.transfer_usd_per_hour
                <= chosen.expected_usd_per_hour - chosen.transfer_usd_per_hour
            )
        ):
            lines.append(
                f"passed over {offer.instance_type} in {offer.zone} "
                f"({show_usd_per_hour(offer.usd_per_hour)}): expected "
                f"{show_usd_per_hour(other.expected_usd_per_hour)} "
                f"with {show_usd_per_hour(other.transfer_usd_per_hour)} for {data.words()}"
            )
            continue
        signals = [f"score {other.score}"] if other.score is not None else []
        if other.history is not None:
            signals.append(f"{other.history.reclaims} reclaim(s) in {other.history.hours:.0f} h")
        lines.append(
            f"passed over {offer.instance_type} in {offer.zone} "
            f"({show_usd_per_hour(offer.usd_per_hour)}): "
            f"expected {show_usd_per_hour(other.expected_usd_per_hour)}, it interrupts often "
            f"({', '.join(signals) or 'prior'})"
        )
    return lines[:3]
