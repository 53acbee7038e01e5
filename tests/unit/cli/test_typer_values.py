"""spotrun's commands coerce their parameters as typer's own would (spotrun/cli/typer_values.py).

Every parameter of every command: its default and a few words a user types, coerced by the
PlainValueParam each parameter carries and by typer's own (pydantic) coercion, give the same
value, or the same error; so do a choice parameter's choices.
"""

from __future__ import annotations

from typing import Any

import typer
import typer.main
from typer._click import Context, Parameter
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param
from typer.core import TyperGroup, _TyperParameter

from spotrun.cli.main import COMMANDS, app
from spotrun.cli.typer_app import LazyCommand
from spotrun.cli.typer_values import CHECKED_TYPER_SERIES, PlainValueParam

WORDS = ("x", "5", "0.5", "-1", "yes", "")


def _parameters(root: Any) -> list[tuple[str, Parameter]]:
    found: list[tuple[str, Parameter]] = []

    def walk(path: str, command: Any) -> None:
        found.extend((path, param) for param in command.params)
        if isinstance(command, TyperGroup):
            for name in command.list_commands(Context(command)):
                walk(f"{path} {name}", command.get_command(Context(command), name))

    walk("spotrun", root)
    return found


def _coerced(runtime: Any, value: Any, param: Parameter, ctx: Context) -> tuple[str, Any]:
    try:
        return "value", runtime.coerce(value, param=param, ctx=ctx)
    except BadParameter as exc:
        return "error", exc.message


def test_every_parameter_coerces_as_typer_does() -> None:
    assert all(isinstance(command, LazyCommand) for command in COMMANDS)
    checked = 0
    root = typer.main.get_command(app)
    ctx = Context(root)
    for path, param in _parameters(root):
        if not isinstance(param, _TyperParameter) or param.type_descriptor.file_annotation:
            continue
        plain = param.get_runtime_param()
        assert isinstance(plain, PlainValueParam), (path, param.name)
        typers_own = build_runtime_param(param.type_descriptor)
        values: list[Any] = [param.default, *WORDS, list(WORDS), tuple(WORDS)]
        for choice in param.type_descriptor.choices or ():  # each choice, as typed and shouted
            values += [choice, str(choice.value), str(choice.value).upper()]
        for value in values:
            if callable(value):
                continue
            assert _coerced(plain, value, param, ctx) == _coerced(typers_own, value, param, ctx), (
                path,
                param.name,
                value,
            )
            checked += 1
    assert checked > 500  # every command's parameters, not a few


def test_the_installed_typer_is_the_series_the_coercion_was_checked_against() -> None:
    """On another typer series every command keeps typer's own coercion (and pays pydantic):
    re-run this file against it, then move CHECKED_TYPER_SERIES."""
    assert typer.__version__.startswith(CHECKED_TYPER_SERIES), typer.__version__
    command = typer.main.get_command(app)
    assert any(
        isinstance(getattr(p, "_runtime_param", None), PlainValueParam)
        for _, p in _parameters(command)
    )
