"""typer's coercion of a parameter's value, without pydantic where the value is already right.

typer (>= 0.20) builds a pydantic TypeAdapter for every parameter it coerces, the unset ones
included: importing pydantic and building them was a third of `spotrun status RUN`'s CPU. The
adapter is kept for every value it could change; spotrun/cli/typer_app.py's commands and
groups hand their parameters this one.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from enum import Enum
from typing import Any

import typer
from typer._click import Context, Parameter
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_choice, lenient_issubclass
from typer.core import _TyperParameter


@dataclass(frozen=True)
class PlainValueParam(RuntimeParam):
    """A value already what typer's adapter returns is kept: a str for a str, an int for an
    int, a float for a float, strs for a list of str (as a list, as the adapter makes it); a
    word among an Enum's choices is that choice. Anything else (a number given as text, a
    path, a word not among the choices, a parser, a range) goes to typer's own, built at
    first need. typer's RuntimeParam.coerce answers an unset value
    itself, before either."""

    descriptor: TypeDescriptor

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        annotation = self.annotation
        plain = self.parameter_info.parser is None and not self.descriptor.is_ranged
        if plain and annotation in (str, int, float) and type(value) is annotation:
            return value
        strs = isinstance(value, (list, tuple)) and all(type(item) is str for item in value)
        if plain and annotation == list[str] and strs:
            return list(value)
        if plain and lenient_issubclass(annotation, Enum):
            # typer's adapter for a choice is this function inside pydantic; a word that is
            # not a choice goes to typer's own below, for its error message
            with suppress(ValueError):
                return coerce_cli_choice(
                    value,
                    choices=list(annotation),
                    case_sensitive=self.parameter_info.case_sensitive,
                    ctx=ctx,
                )
        full = build_runtime_param(self.descriptor)
        return full._coerce_value(value, param=param, ctx=ctx)


# The private pieces above (RuntimeParam, build_runtime_param, a parameter's _runtime_param) were
# checked against this typer series (tests/unit/cli/test_typer_values.py): another release keeps
# typer's own coercion rather than risk a changed private API failing every command.
CHECKED_TYPER_SERIES = "0.29."


def plain_values_without_pydantic(params: list[Parameter]) -> None:
    """Give each typer parameter (files aside) a PlainValueParam, on the checked typer series."""
    if not typer.__version__.startswith(CHECKED_TYPER_SERIES):
        return
    for param in params:
        if isinstance(param, _TyperParameter) and param.type_descriptor.file_annotation is None:
            param._runtime_param = PlainValueParam(
                parameter_info=param.type_descriptor.parameter_info,
                annotation=param.type_descriptor.annotation,
                descriptor=param.type_descriptor,
            )
