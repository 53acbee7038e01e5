"""A foreground sweep's trials as they train: each evaluation as a line, and one progress line
(each live trial's epoch, step, speed, ETA, accuracy and cost so far) under them; piped, plain
lines now and then."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from spotrun.cli.follow_view import (
    COST_EVERY_S,
    ProgressShown,
    fmt_duration,
    fmt_metrics,
    progress_line,
)
from spotrun.core.metrics_file import MetricsTail
from spotrun.core.rundir import METRICS_FILE, PROGRESS_FILE
from spotrun.core.terminal_text import printable
from spotrun.service.follow import ProgressWatch


class TrialsView:
    """`price(index)`: what trial `index` has cost so far (None: not known), asked again at most
    every COST_EVERY_S seconds per trial."""

    def __init__(self, out: Console, price: Callable[[int], float | None]) -> None:
        self.shown = ProgressShown(out)
        self._price = price
        self._tails: dict[int, MetricsTail] = {}
        self._watches: dict[int, ProgressWatch] = {}
        self._progress: dict[int, dict[str, Any]] = {}
        self._costs: dict[int, tuple[float, float | None]] = {}  # index: (priced at, USD)

    def line(self, text: str) -> None:
        self.shown.line(text)

    def poll(self, trials: list[tuple[int, Path, bool]]) -> None:
        """`trials`: (index, run folder, live) of every trial that has a run."""
        for index, run_dir, live in trials:
            if index not in self._tails:
                self._tails[index] = MetricsTail(run_dir / METRICS_FILE)
                self._watches[index] = ProgressWatch(run_dir / PROGRESS_FILE)
            for record in self._tails[index].read_new():
                line = f"trial {index}: epoch {record.get('epoch', '?')}  {fmt_metrics(record)}"
                if "elapsed_s" in record:
                    line += f"  ({fmt_duration(float(record['elapsed_s']))} training)"
                self.shown.line(printable(line))
            moved = self._watches[index].read_new() if live else None
            if moved is not None:
                self._progress[index] = moved
            if not live:
                self._progress.pop(index, None)
                self._costs.pop(index, None)
        if self._progress:
            now = time.time()
            self.shown.progress(
                " | ".join(
                    f"trial {i}: {progress_line(p, self._cost(i), now)}"
                    for i, p in sorted(self._progress.items())
                )
            )

    def _cost(self, index: int) -> float | None:
        priced_at, usd = self._costs.get(index, (float("-inf"), None))
        if time.monotonic() - priced_at >= COST_EVERY_S:
            usd = self._price(index)
            self._costs[index] = (time.monotonic(), usd)
        return usd

    def close(self) -> None:
        self.shown.close()
