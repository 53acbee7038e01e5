"""spotrun's typer classes: every command group and command of the CLI is made from these.

They differ from typer's own in one thing: the -h/--help flag defaults to False. typer leaves
that default unset, and coerces the unset value through a pydantic TypeAdapter, so every
command without --help paid pydantic's import (60-90 ms here) before doing anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.models import CommandFunctionType

try:  # typer >= 0.20 carries its own copy of click
    from typer._click import Context
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import Context  # type: ignore[assignment]


def _help_flag_off_by_default(option: TyperOption | None) -> TyperOption | None:
    # a bool flag whose value is already a bool skips typer's coercion (and pydantic)
    if option is not None and option.default is None:
        option.default = False
    return option


class SpotrunCommand(TyperCommand):
    def get_help_option(self, ctx: Context) -> TyperOption | None:
        return _help_flag_off_by_default(super().get_help_option(ctx))


class SpotrunGroup(TyperGroup):
    def get_help_option(self, ctx: Context) -> TyperOption | None:
        return _help_flag_off_by_default(super().get_help_option(ctx))


class SpotrunTyper(typer.Typer):
    """typer.Typer whose groups and commands are SpotrunGroup and SpotrunCommand."""

    def __init__(self, *, cls: type[TyperGroup] = SpotrunGroup, **options: Any) -> None:
        super().__init__(cls=cls, **options)

    def command(  # type: ignore[override]
        self, name: str | None = None, *, cls: type[TyperCommand] = SpotrunCommand, **options: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        return super().command(name, cls=cls, **options)
