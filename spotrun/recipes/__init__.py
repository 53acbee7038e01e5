"""The named recipes users launch (`spotrun launch digits-fast`)."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from spotrun.errors import NotFoundError
from spotrun.recipes.base import Recipe, Target
from spotrun.recipes.digits import digits_fast
from spotrun.recipes.overrides import apply_overrides
from spotrun.train.methods.catalog import validate_methods
from spotrun.train.models import check_model_name

_FACTORIES: dict[str, Callable[[], Recipe]] = {
    "digits-fast": digits_fast,
}


def recipe_names() -> list[str]:
    return sorted(_FACTORIES)


def get_recipe(name: str, overrides: list[str] | None = None) -> Recipe:
    """The named recipe with `--set` overrides applied; clear errors for unknown names/keys."""
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
    check_recipe(recipe)
    return recipe


def check_recipe(recipe: Recipe) -> None:
    """Everything about a recipe that can be checked without torch or data: model, methods."""
    check_model_name(recipe.model)
    validate_methods(recipe.methods)


__all__ = ["Recipe", "Target", "get_recipe", "recipe_names"]
