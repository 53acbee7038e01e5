"""progress.json: where training is inside its epoch, for a follower's progress line.

The trainer's metrics come once per evaluation; a user watching an epoch of minutes wants the
step, the speed and an ETA in between. This callback rewrites one small JSON file (atomically:
temp file, rename) at most once per `every_s` on the main process, plus at each epoch's end
and when training stops, so its cost is one clock read per step. Sync brings it back from an
instance like any other changed file of the run folder.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spotrun.train.callbacks import Callback
from spotrun.train.events import Event
from spotrun.train.state import State

EVERY_S = 1.0  # the most often the file is rewritten
# What the file says at the events that rewrite it whatever the interval.
_PHASES = {
    Event.FIT_START: "train",
    Event.EVAL_START: "eval",
    Event.EVAL_END: "train",
    Event.FIT_END: "done",
    Event.INTERRUPT: "stopped",
}


class ProgressFile(Callback):
    def __init__(
        self,
        path: Path,
        *,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.every_s = every_s
        self.clock = clock
        self._written_at: float | None = None
        self._window_start = 0.0  # the clock and step where the speed window began
        self._window_step = 0
        self._samples = 0  # samples trained since the window began (every rank's)
        self._s_per_step: float | None = None  # smoothed over windows, for the ETA
        self._samples_per_s: float | None = None
        self._unit = "samples"

    def on_event(self, event: Event, state: State) -> None:
        if not state.is_main:
            return
        if event is Event.BATCH_END:
            if state.inputs is not None and state.inputs.ndim > 0:
                self._samples += int(state.inputs.shape[0]) * state.world_size
                self._unit = "images" if state.inputs.ndim == 4 else "samples"
            now = self.clock()  # the one clock read per step
            if self._written_at is None or now - self._written_at >= self.every_s:
                self._measure(state, now)
                self._write(state, "train", now)
            return
        phase = _PHASES.get(event)
        if phase is None:
            return
        now = self.clock()
        if event is Event.EVAL_START:
            self._measure(state, now)
        elif event in (Event.FIT_START, Event.EVAL_END):  # evaluation time is not speed
            self._window_start, self._window_step, self._samples = now, state.step, 0
        self._write(state, phase, now)

    def _measure(self, state: State, now: float) -> None:
        seconds, steps = now - self._window_start, state.step - self._window_step
        if seconds > 0 and steps > 0:
            per_step = seconds / steps
            smoothed = self._s_per_step
            self._s_per_step = per_step if smoothed is None else 0.7 * smoothed + 0.3 * per_step
            self._samples_per_s = self._samples / seconds
        self._window_start, self._window_step, self._samples = now, state.step, 0

    def _write(self, state: State, phase: str, now: float) -> None:
        self._written_at = now
        left = max(0, state.total_steps - state.step)
        record: dict[str, Any] = {
            "phase": phase,
            # the epoch in progress, counted from 1 (under evaluation: the one just trained)
            "epoch": state.epoch if phase == "eval" else min(state.epoch + 1, state.max_epochs),
            "epochs": state.max_epochs,
            "batch": state.batch_index,  # of this epoch, done
            "batches": state.steps_per_epoch,
            "step": state.step,
            "steps": state.total_steps,
            "train_s": round(state.train_seconds, 3),
            "per_s": None if self._samples_per_s is None else round(self._samples_per_s, 1),
            "unit": self._unit,
            "eta_s": None if self._s_per_step is None else round(left * self._s_per_step, 1),
            "at": time.time(),
        }
        if "test_acc" in state.metrics:
            record["test_acc"] = state.metrics["test_acc"]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.path)
