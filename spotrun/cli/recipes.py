"""`spotrun recipes [show NAME]` and `spotrun methods`: what can be launched, and with what."""

from __future__ import annotations

import json

import typer

from spotrun.cli.complete import complete_recipe
from spotrun.cli.library import api
from spotrun.cli.render import Table, out, print_json
from spotrun.cli.typer_app import SpotrunTyper
from spotrun.recipes import get_recipe
from spotrun.recipes.describe import describe_recipe
from spotrun.train.methods.catalog import describe_catalog

recipes_app = SpotrunTyper(help="List recipes, or show one in full.", rich_markup_mode=None)


@recipes_app.callback(invoke_without_command=True)
def recipes_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """The recipes you can launch, with what each was measured to reach.

    \b
    Examples:
      spotrun recipes
      spotrun recipes --json
    """
    if ctx.invoked_subcommand is not None:
        return
    items = api.recipes()
    if as_json:
        print_json([r.summary() for r in items])
        return
    table = Table(box=None, pad_edge=False)
    for col in ("NAME", "DESCRIPTION", "RESULT"):
        table.add_column(col)
    for r in items:
        table.add_row(r.name, r.description, r.result)
    out.print(table)


@recipes_app.command("show")
def recipes_show(
    name: str = typer.Argument(..., autocompletion=complete_recipe),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """A recipe in full: hyperparameters, methods, resources, stated result.

    \b
    Examples:
      spotrun recipes show digits-fast
    """
    recipe = get_recipe(name, data_here=False)  # showing a recipe needs no data
    if as_json:
        print_json(recipe.model_dump(mode="json"))
        return
    for line in describe_recipe(recipe):
        out.print(line, markup=False)


def methods(as_json: bool = typer.Option(False, "--json")) -> None:
    """The speed-up methods a recipe can switch on (--set methods.NAME={}), in the order they
    apply, with their options and conflicts (spotrun/train/methods/README.md explains each).

    \b
    Examples:
      spotrun methods
      spotrun launch cifar10-fast --set methods.label_smoothing={}
    """
    rows = describe_catalog()
    if as_json:
        print_json(rows)
        return
    for row in rows:
        conflicts = f"  (not with {', '.join(row['conflicts'])})" if row["conflicts"] else ""
        out.print(f"{row['name']}: {row['summary']}{conflicts}", markup=False)
        for option in row["options"]:
            about = f"  {option['description']}" if option["description"] else ""
            out.print(
                f"    {option['name']} = {json.dumps(option['default'])}  "
                f"[{option['type']}]{about}",
                markup=False,
            )
