"""`--set KEY=VALUE` overrides on typed models, with errors that name the key and its type."""

from __future__ import annotations

import difflib
import json
import math
import re
import types
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from spotrun.core.errors import UsageError

M = TypeVar("M", bound=BaseModel)

_OPEN = object()  # a key inside a free-form dict: any name, any JSON value


def apply_overrides(obj: M, items: list[str], *, what: str = "recipe") -> M:
    """A copy of `obj` with each KEY=VALUE applied (dotted keys reach nested models/dicts)."""
    data = obj.model_dump()
    annotations: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--set expects KEY=VALUE, got '{item}'")
        path = key.split(".")
        annotation = _annotation_at(type(obj), path, what)
        annotations[key] = annotation
        _check_bounds(key, raw, annotation)
        _assign(data, path, _coerce(raw, annotation))
    try:
        return type(obj).model_validate(data)
    except ValidationError as exc:
        raise UsageError(_explain(exc, items, annotations)) from exc


# Counts that drive work: a value past these is a typo, not a plan (epochs=1e23 would train
# until stopped). Every other integer key is bounded by MAX_COUNT.
COUNT_LIMITS = {"epochs": 100_000, "grace_epochs": 100_000}
MAX_COUNT = 1_000_000_000
_INTEGER = re.compile(r"^[+-]?[0-9]+$")


def _check_bounds(key: str, raw: str, annotation: Any) -> None:
    """An integer key takes a plain integer within its bound; a number key a finite one."""
    text = raw.strip()
    base = _unwrap_optional(annotation)
    if _is_optional(annotation) and text.lower() in ("null", "none", ""):
        return
    if base is int:
        if not _INTEGER.match(text):
            raise UsageError(f"--set {key}: expected an integer, got '{raw}'")
        limit = COUNT_LIMITS.get(key.rsplit(".", 1)[-1], MAX_COUNT)
        if abs(int(text)) > limit:
            raise UsageError(
                f"--set {key}={text}: more than {limit:,}, the most spotrun accepts there"
            )
    elif base is float:
        try:
            value = float(text)
        except ValueError:
            return  # the model's own check names the type
        if not math.isfinite(value):
            raise UsageError(f"--set {key}: expected a finite number, got '{raw}'")


def _annotation_at(model: type[BaseModel], path: list[str], what: str) -> Any:
    current: Any = model
    for depth, part in enumerate(path):
        if current is _OPEN:
            continue
        base = _unwrap_optional(current)
        if isinstance(base, type) and issubclass(base, BaseModel):
            fields = base.model_fields
            if part not in fields:
                dotted = ".".join(path[: depth + 1])
                prefix = ".".join(path[:depth])
                names = [f"{prefix}.{n}" if prefix else n for n in fields]
                close = difflib.get_close_matches(dotted, names, n=3)
                hint = f"did you mean {', '.join(close)}?" if close else f"keys: {', '.join(names)}"
                raise UsageError(f"unknown --set key '{dotted}' for this {what}", hint=hint)
            current = fields[part].annotation
        elif get_origin(base) is dict:
            current = _OPEN
        else:
            dotted = ".".join(path[:depth])
            raise UsageError(f"--set key '{'.'.join(path)}': '{dotted}' has no sub-keys")
    return current


def _unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _is_optional(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


def _coerce(raw: str, annotation: Any) -> Any:
    text = raw.strip()
    if annotation is _OPEN:
        if text.lower() in ("null", "none"):
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text
    if _is_optional(annotation) and text.lower() in ("null", "none", ""):
        return None
    base = _unwrap_optional(annotation)
    origin = get_origin(base)
    if origin in (list, tuple):
        if text.startswith("["):
            try:
                return json.loads(text)
            except ValueError:
                return text
        return [part.strip() for part in text.split(",") if part.strip()]
    if origin is dict:
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _assign(data: dict[str, Any], path: list[str], value: Any) -> None:
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    if value is None and len(path) == 2 and path[0] == "methods":
        node.pop(path[-1], None)  # a method set to null is switched off
    else:
        node[path[-1]] = value


def expected_type(annotation: Any) -> str:
    base = _unwrap_optional(annotation)
    optional = " (or null)" if _is_optional(annotation) else ""
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


def _explain(exc: ValidationError, items: list[str], annotations: dict[str, Any]) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        key = next((k for k in annotations if loc == k or loc.startswith(k + ".")), loc)
        raw = next((i.partition("=")[2] for i in items if i.partition("=")[0].strip() == key), None)
        kind = err["type"]
        if key in annotations and kind.endswith(("_parsing", "_type", "literal_error")):
            parts.append(f"--set {key}: expected {expected_type(annotations[key])}, got '{raw}'")
        else:
            parts.append(f"--set {key}: {err['msg'].lower()}" + (f" (got '{raw}')" if raw else ""))
    return "; ".join(parts)
