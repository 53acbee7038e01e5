"""The Algorithm contract and the engine that applies algorithms at events.

An algorithm says at which events it acts (`match`) and what it does there (`apply`). The
engine runs matching algorithms in one fixed order, reversed for after-events, and keeps a
trace of what ran so that a run can show exactly which methods touched it and when.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from spotrun.train.events import Event
from spotrun.train.state import State


@runtime_checkable
class Algorithm(Protocol):
    name: str

    def match(self, event: Event, state: State) -> bool: ...

    def apply(self, event: Event, state: State) -> None: ...


class AlgorithmBase:
    """Convenience base: `events` lists where the algorithm acts; state is empty by default."""

    name = "algorithm"
    events: frozenset[Event] = frozenset()

    def match(self, event: Event, state: State) -> bool:
        return event in self.events

    def apply(self, event: Event, state: State) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


@dataclass(frozen=True)
class TraceEntry:
    event: Event
    step: int
    algorithm: str


class Engine:
    """Runs algorithms at each event; `trace` records (event, step, name) of every apply."""

    def __init__(self, algorithms: Sequence[Algorithm], *, keep_trace: int = 10_000) -> None:
        self.algorithms = list(algorithms)
        self.trace: list[TraceEntry] = []
        self._keep_trace = keep_trace

    def run(self, event: Event, state: State) -> None:
        ordered = reversed(self.algorithms) if event.is_after else iter(self.algorithms)
        for algorithm in ordered:
            if algorithm.match(event, state):
                algorithm.apply(event, state)
                if len(self.trace) < self._keep_trace:
                    self.trace.append(TraceEntry(event, state.step, algorithm.name))

    def state_dict(self) -> dict[str, Any]:
        return {a.name: a.state_dict() for a in self.algorithms if hasattr(a, "state_dict")}

    def load_state_dict(self, states: dict[str, Any]) -> None:
        for algorithm in self.algorithms:
            if algorithm.name in states and hasattr(algorithm, "load_state_dict"):
                algorithm.load_state_dict(states[algorithm.name])
