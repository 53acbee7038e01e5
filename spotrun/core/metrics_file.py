"""Reading a run's metrics.jsonl, whole or as it grows (the trainer appends one object per
evaluation; spotrun.train.callbacks.MetricsFile writes it).

Whatever a job writes there is data: a line that is not one JSON object (a torn write, a
hostile line of 100,000 `[`, a number of 5,000 digits) is skipped and counted, never an error
of the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def parse_line(line: bytes | str) -> dict[str, Any] | None:
    """One metrics line as its object, or None when it is not one JSON object."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # json raises these on deep nesting and long ints
        return None
    return value if isinstance(value, dict) else None


class MetricsTail:
    """Returns the complete lines appended since the last read; a torn last line waits.
    `skipped` counts the complete lines that were not one JSON object."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self.skipped = 0

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
            if not line.strip():
                continue
            record = parse_line(line)
            if record is None:
                self.skipped += 1
            else:
                records.append(record)
        return records


def read_all(path: Path) -> list[dict[str, Any]]:
    return MetricsTail(path).read_new()
