"""Speed-up methods as Algorithms for the Trainer, built from a recipe's `methods` mapping.

This package's top level stays free of torch so that launch can validate methods cheaply.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from spotrun.train.methods.catalog import CATALOG, METHODS, MethodInfo, validate_methods

if TYPE_CHECKING:
    from spotrun.train.algorithm import AlgorithmBase


def load_algorithm_class(info: MethodInfo) -> type[AlgorithmBase]:
    module_name, _, attr = info.algorithm.partition(":")
    cls: type[AlgorithmBase] = getattr(importlib.import_module(module_name), attr)
    return cls


def build_methods(config: Mapping[str, Mapping[str, Any] | None]) -> list[AlgorithmBase]:
    """Algorithms for `config` (method name -> options), validated, in catalog order."""
    return [load_algorithm_class(info)(options) for info, options in validate_methods(config)]  # type: ignore[call-arg]


__all__ = ["CATALOG", "METHODS", "build_methods", "validate_methods"]
