"""Population-based training (Jaderberg et al. 2017, "truncation selection" and "perturb"):
the rule, pure. A population of `--trials N` members trains in generations of `--pbt-interval`
epochs; each member's generation is one sweep trial (one run). When a generation has ended,
each member in the bottom quantile by the metric copies the weights of a member in the top
quantile (exploit: its next run starts from that member's checkpoint) and perturbs that
member's values (explore: each --space value times or divided by --pbt-perturb, each --grid
value moved to a neighbour); every other member goes on from its own checkpoint unchanged.

Trial `g * N + m` is member m's generation g. Every choice is seeded by the sweep's seed, the
generation and the member, so a restarted controller decides the same.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from spotrun.core.errors import UsageError
from spotrun.recipes import get_recipe
from spotrun.store.sweep_spec import SweepSpec


@dataclass(frozen=True)
class Member:
    """How one member's generation ended."""

    member: int
    trial: int  # the sweep trial of that generation
    value: float | None  # its metric at its last evaluation; None: it has none
    params: dict[str, str]
    has_checkpoint: bool  # a whole checkpoint came home: it can go on, or be copied


@dataclass(frozen=True)
class NextStep:
    """What one member does in the next generation."""

    member: int
    parent_trial: int  # whose checkpoint it starts from: its own last trial, or a donor's
    exploited: bool  # True: it copied a better member's weights
    params: dict[str, str]  # its values in the next generation


def locate(index: int, population: int) -> tuple[int, int]:
    """(generation, member) of sweep trial `index`."""
    return index // population, index % population


def total_epochs(spec: SweepSpec) -> int:
    return get_recipe(spec.recipe, spec.overrides, data_here=False).epochs


def generations(spec: SweepSpec) -> int:
    assert spec.pbt_interval is not None
    return math.ceil(total_epochs(spec) / spec.pbt_interval)


def segment_epochs(spec: SweepSpec, generation: int) -> int:
    """The epoch generation `generation` trains up to (the trial's `epochs`)."""
    assert spec.pbt_interval is not None
    return min((generation + 1) * spec.pbt_interval, total_epochs(spec))


def check_pbt(spec: SweepSpec) -> int:
    """Refuse a PBT sweep that cannot run; its generation count."""
    if spec.trials is None or spec.trials < 2:
        raise UsageError("--search pbt needs a population of at least 2: give --trials N")
    if spec.random is not None:
        raise UsageError(
            "--search pbt draws its first values itself; give --trials N, not --random"
        )
    if spec.pbt_interval is None:
        raise UsageError("--search pbt needs --pbt-interval EPOCHS (epochs between exploits)")
    if not spec.space and not spec.grid:
        raise UsageError("--search pbt needs values to perturb: --space KEY=LOW:HIGH or --grid")
    if "epochs" in spec.space or "epochs" in spec.grid:
        raise UsageError("--search pbt trains every member to the recipe's epochs; --set epochs=N")
    if spec.early_stop != "none":
        raise UsageError("--search pbt replaces its losers itself; drop --pruner")
    count = generations(spec)
    if count < 2:
        raise UsageError(
            f"--pbt-interval {spec.pbt_interval} is not below the recipe's "
            f"{total_epochs(spec)} epochs: one generation, nothing to exploit",
            hint="give a shorter --pbt-interval or --set epochs=N",
        )
    if count * spec.trials > 1000:
        raise UsageError(f"--search pbt: {count} generations of {spec.trials} is over 1000 trials")
    return count


def ranked(members: list[Member], mode: str) -> list[Member]:
    """Best first; members without a value last (in member order)."""
    valued = [m for m in members if m.value is not None]
    valued.sort(key=lambda m: (-m.value if mode == "max" else m.value, m.member))  # type: ignore[operator]
    return valued + [m for m in members if m.value is None]


def quantile_size(population: int, quantile: float) -> int:
    """Members in the top (and in the bottom) quantile: at least 1, at most half."""
    return max(1, min(population // 2, math.floor(population * quantile)))


def _rng(spec: SweepSpec, generation: int, member: int) -> random.Random:
    return random.Random(spec.seed * 1_000_003 + generation * 1_009 + member)


def explore(spec: SweepSpec, params: dict[str, str], rng: random.Random) -> dict[str, str]:
    """A donor's values perturbed: each --space value times or divided by the factor (kept in
    its range), each --grid value moved one place along its list."""
    out = dict(params)
    for key, rng_range in spec.space.items():
        if key not in params:
            continue
        factor = spec.pbt_perturb if rng.random() < 0.5 else 1 / spec.pbt_perturb
        value = min(max(float(params[key]) * factor, rng_range.low), rng_range.high)
        out[key] = str(round(value)) if rng_range.integer else f"{value:.6g}"
    for key, values in spec.grid.items():
        if key not in params or params[key] not in values:
            continue
        at = values.index(params[key]) + rng.choice((-1, 1))
        out[key] = values[min(max(at, 0), len(values) - 1)]
    return out


def exploit_explore(spec: SweepSpec, members: list[Member], generation: int) -> list[NextStep]:
    """Each member's step into generation `generation`, from how the one before ended.

    Bottom quantile (and any member with no checkpoint to go on from): a top-quantile member's
    checkpoint, its values explored. Donors are members with a value and a checkpoint."""
    order = ranked(members, spec.mode)
    size = quantile_size(len(members), spec.pbt_quantile)
    donors = [m for m in order if m.value is not None and m.has_checkpoint][:size]
    bottom = {m.member for m in order[-size:]}
    steps = []
    for m in sorted(members, key=lambda m: m.member):
        replaced = m.member in bottom or not m.has_checkpoint
        candidates = [d for d in donors if d.member != m.member]
        if not replaced or not candidates:
            steps.append(NextStep(m.member, m.trial, False, dict(m.params)))
            continue
        rng = _rng(spec, generation, m.member)
        donor = rng.choice(candidates)
        steps.append(NextStep(m.member, donor.trial, True, explore(spec, donor.params, rng)))
    return steps


def last_value(records: list[dict[str, Any]], metric: str) -> float | None:
    """The metric at its last finite evaluation."""
    found = None
    for record in records:
        value = record.get(metric)
        if isinstance(value, (int, float)) and math.isfinite(value):
            found = float(value)
    return found
