"""The trials of a sweep: the grid's every combination, draws from the space (Optuna's
RandomSampler), or places a model-based search fills at launch (spotrun.sweep.search); each
trial a list of `--set` overrides checked by the recipe itself."""

from __future__ import annotations

import itertools
import types
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin

from spotrun.core.errors import UsageError
from spotrun.core.lazy import lazy_module
from spotrun.recipes import get_recipe
from spotrun.recipes.base import Recipe
from spotrun.recipes.overrides import _annotation_at
from spotrun.store.sweep_spec import MODEL_SEARCHES, Range, SweepSpec
from spotrun.sweep.pbt import check_pbt

if TYPE_CHECKING:
    from spotrun.sweep import draws
else:  # optuna is heavy to import (~0.3 s); only a sweep that draws pays for it
    draws = lazy_module("spotrun.sweep.draws")

MAX_TRIALS = 1000  # a bigger grid is almost surely a typo; say so before recording anything


def typed_space(raw: dict[str, tuple[float, float, bool]]) -> dict[str, Range]:
    """Ranges typed by the recipe key they set: integer keys get integer ranges."""
    space = {}
    for key, (low, high, log) in raw.items():
        annotation = _annotation_at(Recipe, key.split("."), "recipe")
        base = _unwrap(annotation)
        if base is bool or base not in (int, float):
            raise UsageError(
                f"--space {key}: the recipe key is not a number; sample it with --grid instead"
            )
        integer = base is int
        if integer and (low != int(low) or high != int(high)):
            raise UsageError(f"--space {key}: the key is an integer; give whole-number bounds")
        space[key] = Range(low=low, high=high, log=log, integer=integer)
    return space


def _unwrap(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def trial_params(spec: SweepSpec) -> list[dict[str, str]]:
    """Each trial's key -> value, in launch order; a model-based search's trials are empty
    until the sampler proposes their values at launch (spotrun.sweep.search)."""
    if spec.search in MODEL_SEARCHES:
        return _model_trials(spec)
    if spec.search == "pbt":  # the first generation drawn; the later ones filled as they come
        generations = check_pbt(spec)
        population = spec.trials or 0
        first = _draw(spec.model_copy(update={"random": population}))
        return first + [{} for _ in range(population * (generations - 1))]
    if spec.search == "grid" and (spec.random is not None or spec.space):
        raise UsageError("--search grid tries every --grid combination; drop --random and --space")
    if spec.search == "random" and spec.random is None:
        raise UsageError("--search random needs a trial count: give --trials N")
    if spec.random is None:
        if spec.space:
            raise UsageError("--space draws values at random; give --random N with it")
        if not spec.grid:
            raise UsageError(
                "the sweep has no trials: give --grid KEY=V1,V2 or --random N --space KEY=LOW:HIGH"
            )
        keys = list(spec.grid)
        size = 1
        for values in spec.grid.values():
            size *= len(values)
        if size > MAX_TRIALS:
            raise UsageError(f"the grid has {size} trials; more than {MAX_TRIALS} is refused")
        return [dict(zip(keys, combo)) for combo in itertools.product(*spec.grid.values())]
    if not spec.space and not spec.grid:
        raise UsageError("--random N needs something to draw: --space KEY=LOW:HIGH or --grid")
    if spec.random > MAX_TRIALS:
        raise UsageError(f"--random {spec.random}: more than {MAX_TRIALS} trials is refused")
    return _draw(spec)


def _model_trials(spec: SweepSpec) -> list[dict[str, str]]:
    if spec.random is not None:
        raise UsageError(
            f"--search {spec.search} proposes its own trials; give --trials N, not --random"
        )
    if spec.trials is None:
        raise UsageError(f"--search {spec.search} needs a trial count: give --trials N")
    if not spec.space and not spec.grid:
        raise UsageError(f"--search {spec.search} needs something to search: --space KEY=LOW:HIGH")
    if spec.trials > MAX_TRIALS:
        raise UsageError(f"--trials {spec.trials}: more than {MAX_TRIALS} trials is refused")
    return [{} for _ in range(spec.trials)]


def _draw(spec: SweepSpec) -> list[dict[str, str]]:
    return draws.draw_at_random(spec)


def overrides_of(spec: SweepSpec, params: dict[str, str]) -> list[str]:
    return [*spec.overrides, *(f"{key}={value}" for key, value in params.items())]


def check_trials(spec: SweepSpec, trials: list[dict[str, str]]) -> None:
    """Every trial's overrides through the recipe's own validation; the first bad one names
    its key and value."""
    for params in trials:
        try:
            get_recipe(spec.recipe, overrides_of(spec, params))
        except UsageError as exc:
            shown = ", ".join(f"{k}={v}" for k, v in params.items())
            raise UsageError(f"trial {shown}: {exc.message}", hint=exc.hint) from None
