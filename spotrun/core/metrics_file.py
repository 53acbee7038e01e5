"""Reading a run's metrics.jsonl, whole or as it grows (the trainer appends one object per
evaluation; spotrun.train.callbacks.MetricsFile writes it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class MetricsTail:
    """Returns the complete lines appended since the last read; a torn last line waits."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def read_new(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                if fh.seek(0, 2) < self._offset:  # rewritten shorter (a resume dropped lines)
                    self._offset = 0
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        if len(data) == 0:
            return []
        end = data.rfind(b"\n") + 1
        self._offset += end
        records = []
        for line in data[:end].splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                records.append(value)
        return records


def read_all(path: Path) -> list[dict[str, Any]]:
    return MetricsTail(path).read_new()
