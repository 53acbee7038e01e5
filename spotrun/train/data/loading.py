"""From a recipe's `data` setting to its train and eval batch sources."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotrun.errors import UsageError
from spotrun.train.data import BatchSource
from spotrun.train.data.memory import TensorBatches

if TYPE_CHECKING:
    from spotrun.recipes.base import Recipe


def load_data(
    recipe: Recipe, *, rank: int = 0, world_size: int = 1
) -> tuple[BatchSource, BatchSource]:
    if recipe.data == "digits":
        from spotrun.train.data.digits import load_digits_split

        train_x, train_y, test_x, test_y = load_digits_split()
        train = TensorBatches(
            train_x,
            train_y,
            recipe.batch_size,
            shuffle=True,
            seed=recipe.seed,
            rank=rank,
            world_size=world_size,
        )
        test = TensorBatches(test_x, test_y, 512, shuffle=False, rank=rank, world_size=world_size)
        return train, test
    raise UsageError(
        f"recipe {recipe.name}: unknown data '{recipe.data}'",
        hint="use 'digits' or a folder in the ImageFolder layout",
    )
