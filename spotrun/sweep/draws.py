"""A sweep's space as Optuna's distributions, and sampled values as the `--set` strings a
trial's run gets; independent random draws (Optuna's RandomSampler).

Apart from spotrun.sweep.space so that optuna (heavy to import) loads only for sweeps that draw.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from spotrun.store.sweep_spec import SweepSpec


def format_value(value: float | int, integer: bool) -> str:
    return str(int(value)) if integer else f"{value:.6g}"


def distributions_of(spec: SweepSpec) -> dict[str, BaseDistribution]:
    """The search space: --grid keys categorical, --space keys numeric."""
    found: dict[str, BaseDistribution] = {
        key: CategoricalDistribution(values) for key, values in spec.grid.items()
    }
    for key, rng in spec.space.items():
        if rng.integer:
            found[key] = IntDistribution(int(rng.low), int(rng.high), log=rng.log)
        else:
            found[key] = FloatDistribution(rng.low, rng.high, log=rng.log)
    return found


def shown_params(spec: SweepSpec, params: dict[str, Any]) -> dict[str, str]:
    """Sampled values as the `--set` strings a trial's run gets."""
    shown = {}
    for key, value in params.items():
        rng = spec.space.get(key)
        shown[key] = str(value) if rng is None else format_value(value, rng.integer)
    return shown


def draw_at_random(spec: SweepSpec) -> list[dict[str, str]]:
    """N draws with Optuna's RandomSampler (seeded: the same sweep draws the same trials)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = distributions_of(spec)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=spec.seed))
    return [shown_params(spec, study.ask(space).params) for _ in range(spec.random or 0)]
