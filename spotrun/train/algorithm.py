"""The Algorithm contract and the engine that applies algorithms at events.

An algorithm says at which events it acts (`match`) and what it does there (`apply`). The
engine runs matching algorithms in one fixed order (the catalog's), reversed for the
after-events that close a before-event (after_forward, after_loss, eval_end, ...) so that
pairs nest like brackets, and keeps a trace of what ran so that a run can show exactly
which methods touched it, at which events, and from which step to which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from spotrun.train.events import AFTER_EVENTS, Event
from spotrun.train.state import State


@runtime_checkable
class Algorithm(Protocol):
    name: str

    def match(self, event: Event, state: State) -> bool: ...

    def apply(self, event: Event, state: State) -> None: ...


class AlgorithmBase:
    """Convenience base: `events` lists where the algorithm acts; state is empty by default.

    An algorithm whose behaviour depends on more than (step, epoch) and the RNG keeps that in
    `state_dict`, which goes into every checkpoint, so a resumed run continues exactly.
    """

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


@dataclass
class TraceCount:
    """How often one algorithm ran at one event, and over which steps."""

    count: int
    first_step: int
    last_step: int


class Engine:
    """Runs algorithms at each event.

    `trace` keeps the first `keep_trace` (event, step, name) entries in full; `counts` sums every
    apply over the whole run (they travel in checkpoints, so a resumed run's summary is whole).
    """

    def __init__(self, algorithms: Sequence[Algorithm], *, keep_trace: int = 10_000) -> None:
        names = [a.name for a in algorithms]
        if len(set(names)) != len(names):
            raise ValueError(f"algorithm names must be unique, got {names}")
        self.algorithms = list(algorithms)
        self._reversed = list(reversed(self.algorithms))
        self.trace: list[TraceEntry] = []
        self.counts: dict[tuple[str, str], TraceCount] = {}
        self._keep_trace = keep_trace

    def run(self, event: Event, state: State) -> None:
        for algorithm in self._reversed if event in AFTER_EVENTS else self.algorithms:
            if algorithm.match(event, state):
                algorithm.apply(event, state)
                self._record(event, state.step, algorithm.name)

    def _record(self, event: Event, step: int, name: str) -> None:
        if len(self.trace) < self._keep_trace:
            self.trace.append(TraceEntry(event, step, name))
        key = (name, event.value)
        seen = self.counts.get(key)
        if seen is None:
            self.counts[key] = TraceCount(1, step, step)
        else:
            seen.count += 1
            seen.last_step = step

    def summary(self) -> list[dict[str, Any]]:
        """One row per (algorithm, event) that ran, in application order."""
        order = {a.name: i for i, a in enumerate(self.algorithms)}
        rows = [
            {"algorithm": name, "event": event, **vars(c)}
            for (name, event), c in self.counts.items()
        ]
        return sorted(rows, key=lambda r: (order.get(r["algorithm"], -1), r["first_step"]))

    def state_dict(self) -> dict[str, Any]:
        return {a.name: a.state_dict() for a in self.algorithms if hasattr(a, "state_dict")}

    def load_state_dict(self, states: dict[str, Any]) -> None:
        for algorithm in self.algorithms:
            if algorithm.name in states and hasattr(algorithm, "load_state_dict"):
                algorithm.load_state_dict(states[algorithm.name])

    def trace_state(self) -> list[list[Any]]:
        return [[n, e, c.count, c.first_step, c.last_step] for (n, e), c in self.counts.items()]

    def load_trace_state(self, rows: list[list[Any]]) -> None:
        self.counts = {
            (str(n), str(e)): TraceCount(int(c), int(f), int(la)) for n, e, c, f, la in rows
        }
