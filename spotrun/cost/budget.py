"""Budget arithmetic, pure: when must a run start stopping so its bill stays under its cap?

From the spend so far (the bill up to now), each live instance's price now and start time, and
the seconds that stopping takes (checkpoint, sync, terminate: the instances keep billing all
along), it projects the spend forward at today's prices and finds the last moment at which
stopping can begin and still end under the cap. The controller asks again at every poll with
the price then in force, so a price change moves the moment; the stop margin absorbs the rest.

Every instance is projected at its per-second price with the 60-second minimum; the free first
hour of an instance AWS interrupts is never counted on (a stop by spotrun pays its seconds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from spotrun.core.durations import show_duration
from spotrun.core.money import show_usd
from spotrun.cost.amounts import HOUR_S
from spotrun.cost.rules import MINIMUM_BILLED_S


@dataclass(frozen=True)
class LiveInstance:
    started_at: int  # unix seconds
    usd_per_hour: Fraction  # compute price in force now (spot, or on-demand)
    storage_usd_per_hour: Fraction = Fraction(0)  # its volumes' GB-month price, per hour


@dataclass(frozen=True)
class StopMargin:
    """Seconds from deciding to stop until the last instance stops billing."""

    checkpoint_s: float = 60.0
    sync_s: float = 60.0
    terminate_s: float = 60.0

    @property
    def total_s(self) -> int:
        return math.ceil(self.checkpoint_s + self.sync_s + self.terminate_s)


class Action(str, Enum):
    CONTINUE = "continue"
    STOP_NOW = "stop-now"


@dataclass(frozen=True)
class Verdict:
    action: Action
    stop_at: int | None  # when to start stopping; None: at these prices the cap is never met
    seconds_left: int | None  # until stop_at
    projected_usd: Fraction  # the spend once stopping, begun at stop_at (or now), is done
    reason: str


def spend_at(at: int, now: int, spent: Fraction, instances: list[LiveInstance]) -> Fraction:
    """The spend projected at time `at` >= now: the spend so far plus what each instance adds.

    The spend so far already holds each instance's charge up to now, a minute at least; from
    now on it adds only the seconds beyond that."""
    added = Fraction(0)
    for inst in instances:
        billed_now = max(now - inst.started_at, MINIMUM_BILLED_S)
        billed_then = max(at - inst.started_at, MINIMUM_BILLED_S)
        added += inst.usd_per_hour * (billed_then - billed_now) / HOUR_S
        added += inst.storage_usd_per_hour * (at - now) / HOUR_S
    return spent + added


def latest_end(
    now: int, spent: Fraction, cap: Fraction, instances: list[LiveInstance]
) -> int | None:
    """The last whole second at which the spend is still within the cap (>= now), or None if
    it never passes the cap; now - 1 when it already has."""
    if spend_at(now, now, spent, instances) > cap:
        return now - 1
    # The spend is piecewise linear in time: flat until an instance's first minute is used up,
    # then rising at its price. Walk the pieces in order until one crosses the cap.
    bends = sorted({inst.started_at + MINIMUM_BILLED_S for inst in instances} | {now})
    bends = [b for b in bends if b >= now]
    for i, start in enumerate(bends):
        rate = sum(
            (
                (inst.usd_per_hour if start >= inst.started_at + MINIMUM_BILLED_S else 0)
                + inst.storage_usd_per_hour
            )
            for inst in instances
        ) / Fraction(HOUR_S)
        at_start = spend_at(start, now, spent, instances)
        end = bends[i + 1] if i + 1 < len(bends) else None
        if rate == 0:
            continue
        crossing = start + (cap - at_start) / rate  # where this piece meets the cap
        if end is None or crossing < end:
            return math.floor(crossing)
    return None


def decide(
    now: float,
    spent: Fraction,
    cap: Fraction,
    instances: list[LiveInstance],
    margin: StopMargin,
) -> Verdict:
    """Whether to keep going, and the moment to start stopping."""
    t = math.floor(now)
    last = latest_end(t, spent, cap, instances)
    if last is None:
        projected = spend_at(t + margin.total_s, t, spent, instances)
        return Verdict(
            Action.CONTINUE, None, None, projected, "nothing live is billing at a price above 0"
        )
    stop_at = last - margin.total_s
    if stop_at <= t:
        projected = spend_at(t + margin.total_s, t, spent, instances)
        return Verdict(
            Action.STOP_NOW,
            t,
            0,
            projected,
            f"stopping takes {show_duration(margin.total_s)} and would end at a projected "
            f"{show_usd(projected)} against the {show_usd(cap)} cap",
        )
    projected = spend_at(last, t, spent, instances)
    return Verdict(
        Action.CONTINUE,
        stop_at,
        stop_at - t,
        projected,
        f"at today's prices the cap is reached in {show_duration(last - t)}; stopping starts "
        f"{show_duration(margin.total_s)} before that",
    )
