"""`--set KEY=VALUE` overrides on typed models, with errors that name the key and its type."""

from __future__ import annotations

import difflib
import json
import math
import re
from typing import Any, TypeVar, get_origin

from pydantic import BaseModel, ValidationError

from spotrun.core.annotation_words import expected_type, is_optional, unwrap_optional
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
# Threads past 1,024 are a typo on any instance, and torch crashes creating 99,999,999.
COUNT_LIMITS = {"epochs": 100_000, "grace_epochs": 100_000, "threads": 1_024}
MAX_COUNT = 1_000_000_000
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _check_bounds(key: str, raw: str, annotation: Any) -> None:
    """An integer key takes a plain integer within its bound; a number key a finite one."""
    text = raw.strip()
    base = unwrap_optional(annotation)
    if is_optional(annotation) and text.lower() in ("null", "none", ""):
        return
    if base is int:
        if not _INTEGER.fullmatch(text):
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
        base = unwrap_optional(current)
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


def _coerce(raw: str, annotation: Any) -> Any:
    text = raw.strip()
    if annotation is _OPEN:
        if text.lower() in ("null", "none"):
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text
    if is_optional(annotation) and text.lower() in ("null", "none", ""):
        return None
    base = unwrap_optional(annotation)
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
