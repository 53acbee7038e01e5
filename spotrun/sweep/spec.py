"""The sweep command's words: `--grid KEY=V1,V2`, `--space KEY=LOW:HIGH[:log]` and `--metric`,
parsed here into typed values (the stored model, SweepSpec, is spotrun.store.sweep_spec) and
checked against the recipe's own `--set` validation before anything is launched.
"""

from __future__ import annotations

import math
from typing import Literal

from spotrun.core.errors import UsageError
from spotrun.core.suggest import did_you_mean

# What the trainer writes to metrics.jsonl at every evaluation (spotrun.train.trainer).
LOGGED_METRICS = ("train_loss", "test_loss", "test_acc", "lr", "elapsed_s", "step", "epoch")
# The direction that makes sense for each, when --mode is not given.
DEFAULT_MODES: dict[str, Literal["max", "min"]] = {
    "test_acc": "max",
    "train_loss": "min",
    "test_loss": "min",
}


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """`KEY=V1,V2,...` items into key -> values (in order, duplicates refused)."""
    grid: dict[str, list[str]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--grid expects KEY=V1,V2,..., got '{item}'")
        values = [v.strip() for v in raw.split(",")]
        if not raw.strip() or any(not v for v in values):
            raise UsageError(
                f"--grid {key}: empty value list '{raw}'", hint="give KEY=V1,V2 (at least one)"
            )
        if key in grid:
            raise UsageError(f"--grid {key} is given twice; list every value in one --grid")
        if len(set(values)) != len(values):
            raise UsageError(f"--grid {key} repeats a value: {raw}")
        grid[key] = values
    return grid


def parse_space(items: list[str]) -> dict[str, tuple[float, float, bool]]:
    """`KEY=LOW:HIGH[:log]` items into key -> (low, high, log); the type comes later."""
    space: dict[str, tuple[float, float, bool]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        parts = raw.split(":")
        if not sep or not key or len(parts) not in (2, 3):
            raise UsageError(f"--space expects KEY=LOW:HIGH or KEY=LOW:HIGH:log, got '{item}'")
        if len(parts) == 3 and parts[2].strip() != "log":
            raise UsageError(f"--space {key}: the third part may only be 'log', got '{parts[2]}'")
        try:
            low, high = float(parts[0]), float(parts[1])
        except ValueError:
            raise UsageError(f"--space {key}: '{raw}' is not LOW:HIGH of two numbers") from None
        log = len(parts) == 3
        if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
            raise UsageError(f"--space {key}: the range {raw} is empty; LOW must be below HIGH")
        if log and low <= 0:
            raise UsageError(f"--space {key}: a log range must start above 0, got {parts[0]}")
        if key in space:
            raise UsageError(f"--space {key} is given twice")
        space[key] = (low, high, log)
    return space


def check_metric(metric: str, mode: str | None) -> Literal["max", "min"]:
    """The metric must be one the trainer logs; returns the mode (given or the usual one)."""
    if metric not in LOGGED_METRICS:
        close = did_you_mean(metric, LOGGED_METRICS)
        raise UsageError(
            f"--metric {metric}: the recipe does not log it" + (f"; {close}" if close else ""),
            hint=f"the trainer logs {', '.join(LOGGED_METRICS)}",
        )
    if mode is None:
        return DEFAULT_MODES.get(metric, "max")
    if mode not in ("max", "min"):
        raise UsageError(f"--mode must be max or min, got '{mode}'")
    return "max" if mode == "max" else "min"


SEARCHES = ("random", "grid", "tpe", "cmaes", "qmc", "pbt")


def check_search(
    search: str | None, trials: int | None, random: int | None
) -> tuple[str | None, int | None]:
    """(--search, the random draws' count): --trials N counts a random search's draws too."""
    if search is not None and search not in SEARCHES:
        close = did_you_mean(search, SEARCHES)
        raise UsageError(
            f"--search must be one of {', '.join(SEARCHES)}, got '{search}'"
            + (f"; {close}" if close else "")
        )
    if trials is not None and trials < 1:
        raise UsageError(f"--trials must be at least 1, got {trials}")
    if trials is not None and search in (None, "grid"):
        raise UsageError(
            "--trials counts the trials a search draws; a grid tries every --grid combination",
            hint="give --search random|tpe|cmaes|qmc|pbt with it",
        )
    if search == "random" and trials is not None:
        if random is not None and random != trials:
            raise UsageError(f"--random {random} and --trials {trials} disagree; give one")
        return search, trials
    return search, random


def check_pbt_options(search: str | None, interval: int | None, perturb: float) -> None:
    """--pbt-interval and --pbt-perturb belong to --search pbt, and make sense."""
    if search != "pbt":
        if interval is not None or perturb != 1.2:
            raise UsageError("--pbt-interval and --pbt-perturb are for --search pbt")
        return
    if interval is not None and interval < 1:
        raise UsageError(f"--pbt-interval must be at least 1 epoch, got {interval}")
    if not (math.isfinite(perturb) and perturb > 1):
        raise UsageError(f"--pbt-perturb must be a factor above 1 (e.g. 1.2), got {perturb}")
