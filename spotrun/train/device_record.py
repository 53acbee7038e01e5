"""device.json in a run folder: the device a run trained on and what auto chose there, and why.

The trainer writes it at start (rank 0; again after a resume, perhaps on another instance);
the run folder syncs back whole, so `spotrun status` and the controller's events read it here.
No torch: status reads it without importing the trainer.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotrun.core.rundir import DEVICE_FILE


@dataclass(frozen=True)
class DeviceRecord:
    device: str  # the capabilities' line: "cpu AMD EPYC (AVX2; no avx512_bf16/amx_bf16)"
    capabilities: dict[str, Any]
    choices: list[dict[str, str]]  # MethodChoice.to_dict() of each device-aware method
    written_at: float
    probe: dict[str, Any] | None = None  # bf16 against fp32 as timed here, where that decided

    def line(self) -> str:
        """One line: the device, then each choice with its reason."""
        chosen = "; ".join(f"{c['method']} {c['use']} ({c['reason']})" for c in self.choices)
        return f"{self.device}: {chosen}" if chosen else self.device

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "capabilities": self.capabilities,
            "choices": self.choices,
            "written_at": self.written_at,
            "probe": self.probe,
            "line": self.line(),
        }


def write_record(
    run_dir: Path,
    device: str,
    capabilities: dict[str, Any],
    choices: list[dict[str, str]],
    probe: dict[str, Any] | None = None,
) -> DeviceRecord:
    record = DeviceRecord(device, capabilities, choices, time.time(), probe)
    path = run_dir / DEVICE_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record.to_dict(), indent=2) + "\n")
    os.replace(tmp, path)  # a reader never sees half a file
    return record


def read_record(run_dir: Path) -> DeviceRecord | None:
    """The run's device record, or None if it has none yet (or it is unreadable)."""
    try:
        data = json.loads((run_dir / DEVICE_FILE).read_text())
        return DeviceRecord(
            str(data["device"]),
            dict(data["capabilities"]),
            [dict(c) for c in data["choices"]],
            float(data["written_at"]),
            data.get("probe") if isinstance(data.get("probe"), dict) else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


TOLD_FILE = ".device-told"  # the written_at of the record last turned into an event


class DeviceWatch:
    """Turns each new device.json (first start, a resume elsewhere) into one event line.

    What it told is kept in the run folder, not only in memory: a controller that comes back
    (restarted, or a new one after the laptop was closed) does not tell it again."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        try:
            self._told: float | None = float((run_dir / TOLD_FILE).read_text())
        except (OSError, ValueError):
            self._told = None

    def poll(self) -> list[str]:
        record = read_record(self.run_dir)
        if record is None or record.written_at == self._told:
            return []
        self._told = record.written_at
        tmp = self.run_dir / (TOLD_FILE + ".tmp")
        tmp.write_text(repr(record.written_at))
        os.replace(tmp, self.run_dir / TOLD_FILE)
        return [record.line()]
