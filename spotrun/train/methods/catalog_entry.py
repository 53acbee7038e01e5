"""One entry of the methods catalog: a method's name, summary, options model, Algorithm and
plain functions. No torch here: the Algorithm is named, imported only when a trainer is built."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel


@dataclass(frozen=True)
class MethodInfo:
    name: str
    summary: str
    options: type[BaseModel]
    algorithm: str  # "module:Class", imported only when a trainer is built
    conflicts: frozenset[str] = frozenset()
    functional: tuple[str, ...] = ()  # its plain functions in spotrun.train.functional


def method_entry(
    name: str,
    summary: str,
    options: type[BaseModel],
    algorithm: str,
    *functional: str,
    conflicts: tuple[str, ...] = (),
) -> MethodInfo:
    """`algorithm` is "module:Class" under spotrun.train.methods; `functional`, the names of its
    plain functions in spotrun.train.functional."""
    return MethodInfo(
        name,
        summary,
        options,
        f"spotrun.train.methods.{algorithm}",
        frozenset(conflicts),
        functional,
    )
