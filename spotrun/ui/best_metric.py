"""A run's best metric for the runs page, read as its metrics.jsonl grows.

The runs page asks for every run's best every poll (2 s); reading each whole file again made
that request grow with the runs' ages (100 live runs: most of a second, nearly all of it JSON
parsing). Each file is read from where the last read stopped; a file replaced or shortened (a
resume drops the lines after its checkpoint) is read again from its start.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotrun.core.metrics_file import MetricsTail

# (metric, True when higher is better), in the order the page prefers them
PREFERRED = (("test_acc", True), ("test_loss", False))


@dataclass
class _FileBest:
    tail: MetricsTail
    identity: tuple[int, int] = (0, 0)  # (inode, size) at the last read
    best: dict[str, float] = field(default_factory=dict)

    def read(self) -> None:
        for record in self.tail.read_new():
            for metric, higher in PREFERRED:
                found = record.get(metric)
                if not isinstance(found, (int, float)) or isinstance(found, bool):
                    continue
                value = float(found)
                old = self.best.get(metric)
                if old is None or (value > old if higher else value < old):
                    self.best[metric] = value


class BestMetrics:
    """The best metric of each run folder's metrics.jsonl, kept between polls."""

    def __init__(self) -> None:
        self._files: dict[Path, _FileBest] = {}

    def best(self, path: Path) -> dict[str, Any] | None:
        """The best test accuracy reached (else the lowest test loss), or None."""
        try:
            stat = os.stat(path)
        except OSError:
            self._files.pop(path, None)
            return None
        known = self._files.get(path)
        if known is None or known.identity[0] != stat.st_ino or stat.st_size < known.identity[1]:
            known = self._files[path] = _FileBest(MetricsTail(path))
        known.read()
        known.identity = (stat.st_ino, stat.st_size)
        for metric, _ in PREFERRED:
            if metric in known.best:
                return {"metric": metric, "value": known.best[metric]}
        return None
