"""Modules imported at their first use: spotrun's one way to keep a heavy import off a path.

A module that needs something heavy on only some of its paths (pydantic's models, optuna,
PIL, the run machinery behind a command) names it once at its top, beside its other imports:

    if TYPE_CHECKING:
        from spotrun.core import config
    else:  # pydantic (~100 ms): only the paths that read settings pay it
        config = lazy_module("spotrun.core.config")

Type checkers and the import contracts (.importlinter, scripts/import_cycles.py) see the
real import; at run time the module is imported the first time an attribute is read.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for module `name`, importing it at the first attribute read.

    `light` names attributes to take from a lighter module that the heavy one re-exports
    them from (the same objects), so a caller that needs only those never loads `name`."""

    def __init__(self, name: str, light: dict[str, str] | None = None) -> None:
        self._name = name
        self._light = light or {}
        self._module: ModuleType | None = None

    def _load(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        if self._module is None and attr in self._light:
            return getattr(importlib.import_module(self._light[attr]), attr)
        return getattr(self._load(), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name}>"


def lazy_module(name: str, light: dict[str, str] | None = None) -> Any:
    """`config = lazy_module("spotrun.core.config")`: the module, imported when first used."""
    return LazyModule(name, light)
