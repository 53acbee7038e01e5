"""How a typed field's annotation reads to a user ("an integer (or null)"), for messages that
name what a setting expects: `--set` overrides (spotrun/recipes/overrides.py) and the methods
catalog (spotrun/train/methods/catalog.py) both word types this way."""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin


def unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def is_optional(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


def expected_type(annotation: Any) -> str:
    base = unwrap_optional(annotation)
    optional = " (or null)" if is_optional(annotation) else ""
    if base is bool:
        return "true or false" + optional
    if base is int:
        return "an integer" + optional
    if base is float:
        return "a number" + optional
    if base is str:
        return "text" + optional
    if get_origin(base) is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(base)) + optional
    if get_origin(base) in (list, tuple):
        inner = get_args(base)
        return f"a comma-separated list of {expected_type(inner[0]) if inner else 'values'}"
    if get_origin(base) is dict:
        return "a JSON object"
    return getattr(base, "__name__", str(base)) + optional
