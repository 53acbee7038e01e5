"""Training curves for TensorBoard: event files beside metrics.jsonl in the run folder.

`tensorboard --logdir SPOTRUN_HOME/runs` then shows every run, one TensorBoard run per run
folder; sync brings the files back from instances like metrics.jsonl (they only grow). The
writer is TensorBoard's own (through torch.utils.tensorboard), imported only when training
starts, on the main process.

A resumed run writes a new event file and opens it with a session start at the step after its
checkpoint: TensorBoard then drops the points of the earlier files from that step on, which the
resumed run writes again, so each evaluation shows once however often the run was stopped.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from spotrun.train.callbacks import Callback
from spotrun.train.events import Event
from spotrun.train.state import State


class TensorBoardCurves(Callback):
    """One scalar per metric at every evaluation, at the trainer's step."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._writer: Any = None

    def on_event(self, event: Event, state: State) -> None:
        if not state.is_main:
            return
        if event is Event.FIT_START:
            self._open(state.step)
        elif event is Event.EVAL_END and self._writer is not None:
            for name, value in scalar_metrics(state.metrics).items():
                self._writer.add_scalar(name, value, global_step=state.step)
            # Written through at once: sync copies the file while the run goes on.
            self._writer.flush()
        elif event in (Event.INTERRUPT, Event.FIT_END):
            self.close()

    def _open(self, step: int) -> None:
        # tensorboard (~0.15 s on top of torch): only runs that write curves
        from torch.utils.tensorboard import SummaryWriter

        self.close()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # purge_step: TensorBoard forgets points of earlier files at and after it (a resume).
        purge = step + 1 if step > 0 else None
        self._writer = SummaryWriter(log_dir=str(self.run_dir), purge_step=purge, flush_secs=30)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def scalar_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The metrics that draw as curves: finite numbers (not flags or text)."""
    return {
        name: float(value)
        for name, value in metrics.items()
        if isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    }
