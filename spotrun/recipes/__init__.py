"""The named recipes users launch (`spotrun launch digits-fast`)."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from spotrun.core.config import load_settings
from spotrun.core.errors import NotFoundError
from spotrun.datasets.spec import is_remote, parse_data
from spotrun.recipes.base import Recipe, Target
from spotrun.recipes.cifar import cifar10_baseline, cifar10_fast
from spotrun.recipes.digits import digits_fast
from spotrun.recipes.gpt2 import gpt2_small_baseline, gpt2_small_fast
from spotrun.recipes.imagenet import resnet50_baseline, resnet50_fast, resnet101_fast
from spotrun.recipes.overrides import apply_overrides
from spotrun.recipes.shakespeare import shakespeare_baseline, shakespeare_fast
from spotrun.train.data.source import check_data, check_text_file
from spotrun.train.methods.catalog import validate_methods
from spotrun.train.models import check_model_name

_FACTORIES: dict[str, Callable[[], Recipe]] = {
    "digits-fast": digits_fast,
    "cifar10-baseline": cifar10_baseline,
    "cifar10-fast": cifar10_fast,
    "resnet50-baseline": resnet50_baseline,
    "resnet50-fast": resnet50_fast,
    "resnet101-fast": resnet101_fast,
    "shakespeare-baseline": shakespeare_baseline,
    "shakespeare-fast": shakespeare_fast,
    "gpt2-small-baseline": gpt2_small_baseline,
    "gpt2-small-fast": gpt2_small_fast,
}


def recipe_names() -> list[str]:
    return sorted(_FACTORIES)


def get_recipe(name: str, overrides: list[str] | None = None, *, data_here: bool = True) -> Recipe:
    """The named recipe with `--set` overrides applied; clear errors for unknown names/keys.

    data_here=False skips checking that the data is on this machine (for a launch whose data
    is found on the instance itself).
    """
    try:
        factory = _FACTORIES[name]
    except KeyError:
        close = difflib.get_close_matches(name, _FACTORIES, n=3, cutoff=0.5)
        hint = (
            f"did you mean {', '.join(close)}?"
            if close
            else f"known recipes: {', '.join(recipe_names())}"
        )
        raise NotFoundError(f"unknown recipe '{name}'", hint=hint) from None
    recipe = factory()
    if overrides:
        recipe = apply_overrides(recipe, overrides)
    check_recipe(recipe, data_here=data_here)
    return recipe


def check_recipe(recipe: Recipe, *, data_here: bool = True) -> None:
    """Everything about a recipe that can be checked without torch: model, methods, and (when
    data_here) that its data exists and is laid out as expected, from folder listings alone."""
    check_model_name(recipe.model)
    validate_methods(recipe.methods)
    if is_remote(recipe.data):  # s3:// or snapshot:, checked at launch, staged by the job
        parse_data(recipe.data)
    elif data_here and recipe.text is not None:
        check_text_file(recipe.data, load_settings().data_path)
    elif data_here and recipe.data != "digits":
        check_data(recipe.data, load_settings().data_path)


__all__ = ["Recipe", "Target", "get_recipe", "recipe_names"]
