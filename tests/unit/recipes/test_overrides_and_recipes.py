from __future__ import annotations

import pytest

from spotrun.core.errors import NotFoundError, UsageError
from spotrun.recipes import get_recipe, recipe_names


def test_known_recipes_validate() -> None:
    for name in recipe_names():
        recipe = get_recipe(name, data_here=False)  # the image sets are not on this machine
        assert recipe.name == name and recipe.result and recipe.measured_with


def test_unknown_recipe_suggests_close_names() -> None:
    with pytest.raises(NotFoundError, match="did you mean digits-fast"):
        get_recipe("digits-fsat")


def test_overrides_apply_with_types() -> None:
    r = get_recipe(
        "digits-fast",
        [
            "epochs=3",
            "lr=0.05",
            "nesterov=false",
            "resources.gpus=1",
            "methods.label_smoothing.smoothing=0.2",
            "checkpoint_every_steps=null",
        ],
    )
    assert (r.epochs, r.lr, r.nesterov, r.resources.gpus) == (3, 0.05, False, 1)
    assert r.methods["label_smoothing"] == {"smoothing": 0.2}
    assert r.checkpoint_every_steps is None


def test_method_switched_off_with_null() -> None:
    r = get_recipe("digits-fast", ["methods.label_smoothing=null"])
    assert "label_smoothing" not in r.methods


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("lrr=0.1", "unknown --set key 'lrr'.*did you mean lr"),
        ("epochs=abc", "--set epochs: expected an integer, got 'abc'"),
        ("lr=fast", "--set lr: expected a number, got 'fast'"),
        ("nesterov=maybe", "expected true or false"),
        ("optimizer=adam", "expected one of sgd, adamw"),
        ("epochs=0", "greater than or equal to 1"),
        ("resources.gpu=2", "unknown --set key 'resources.gpu'.*resources.gpus"),
        ("epochs.x=1", "has no sub-keys"),
        ("novalue", "expects KEY=VALUE"),
        ("methods.one_cycle.bogus=1", "method one_cycle: unknown key 'bogus'"),
        ("methods.mixupp={}", "unknown method 'mixupp'"),
        ("methods.warmup_decay={}", "cannot be used together"),
        ("model=resnet", "unknown model 'resnet'"),
    ],
)
def test_bad_overrides_name_key_and_type(item: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        get_recipe("digits-fast", [item])
