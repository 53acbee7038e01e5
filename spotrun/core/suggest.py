"""Did-you-mean: the one way spotrun suggests what a user meant by a word it does not know.

Used for recipe names, --set keys, methods, and the keys of config.toml and task files.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any


def close_words(word: str, known: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    return difflib.get_close_matches(word, list(known), n=n, cutoff=cutoff)


def did_you_mean(word: str, known: Iterable[str]) -> str | None:
    """'did you mean a, b?' for the known words close to `word`, None if none is."""
    close = close_words(word, known)
    return f"did you mean {', '.join(close)}?" if close else None


def unknown_key(model: Any, loc: Sequence[int | str]) -> str:
    """The message for key `loc` (a pydantic error location) that `model` does not have,
    with a suggestion from the keys allowed at that place in the model."""
    key = ".".join(str(p) for p in loc)
    allowed = _fields_at(model, loc[:-1])
    hint = did_you_mean(str(loc[-1]), allowed) if loc and allowed else None
    return f"unknown key '{key}'" + (f" ({hint})" if hint else "")


def _fields_at(model: Any, path: Sequence[int | str]) -> list[str]:
    """The field names of the (nested) pydantic model reached by `path`; [] if none is."""
    current = model
    for part in path:
        fields = getattr(current, "model_fields", None)
        if fields is None or part not in fields:
            return []
        current = _model_in(fields[part].annotation)
        if current is None:
            return []
    fields = getattr(current, "model_fields", None)
    return list(fields) if fields is not None else []


def _model_in(annotation: Any) -> Any:
    """The pydantic model an annotation holds (`X`, `X | None`), None if it holds none."""
    if hasattr(annotation, "model_fields"):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        for arg in typing.get_args(annotation):
            if hasattr(arg, "model_fields"):
                return arg
    return None
