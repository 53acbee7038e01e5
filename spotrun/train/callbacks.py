"""Callbacks observe training (logging, metrics files); unlike algorithms they change nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from spotrun.core.display_words import show_metrics
from spotrun.train.events import Event
from spotrun.train.state import State


class Callback:
    def on_event(self, event: Event, state: State) -> None:
        return None


class MetricsFile(Callback):
    """Appends one JSON object per evaluation to metrics.jsonl (main process only).

    On a resume it first drops lines newer than the checkpoint, which the resumed run writes
    again, so the file holds each evaluation exactly once however often the run was stopped.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_event(self, event: Event, state: State) -> None:
        if not state.is_main:
            return
        if event is Event.FIT_START:
            self._truncate_after(state.step)
        elif event is Event.EVAL_END:
            record = {"step": state.step, "epoch": state.epoch, **state.metrics}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as fh:
                fh.write(json.dumps(record) + "\n")

    def _truncate_after(self, step: int) -> None:
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    kept.append(line)
            except ValueError:
                continue  # a torn last line from a kill mid-write
        self.path.write_text("".join(f"{line}\n" for line in kept))


class ConsoleProgress(Callback):
    """One line per evaluation and per checkpoint, for the tmux pane and job.log."""

    def __init__(self, stream: TextIO = sys.stdout) -> None:
        self.stream = stream

    def on_event(self, event: Event, state: State) -> None:
        if not state.is_main:
            return
        if event is Event.FIT_START and state.step > 0:
            self._print(f"resumed at epoch {state.epoch} step {state.step}")
        elif event is Event.EVAL_END:
            shown = show_metrics(state.metrics)  # named as every screen names them
            self._print(f"epoch {state.epoch}/{state.max_epochs}  step {state.step}  {shown}")
        elif event is Event.INTERRUPT:
            self._print(f"{state.describe_stop()}: checkpointing at step {state.step}")

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)
