"""Checkpoints that survive being killed at any instant.

A checkpoint is written to a temporary file, fsynced and renamed into place, then the folder is
fsynced; the previous checkpoint is kept until the next one is complete. Loading takes the
newest file that reads back whole and falls back to the one before it, saying so.
"""

from __future__ import annotations

import logging
import os
import pickle
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spotrun.core.errors import TrainingError
from spotrun.core.rundir import CHECKPOINT_NAME, checkpoint_file_name

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # 2: per-rank RNG states and loss sums, engine trace counts


def rng_state() -> dict[str, Any]:
    np_state: tuple[Any, ...] = np.random.get_state()  # type: ignore[assignment]
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(_as_python_state(state["python"]))
    np_state = state["numpy"]
    np.random.set_state(
        (
            "MT19937",
            np_state["keys"].numpy().astype(np.uint32),
            np_state["pos"],
            np_state["has_gauss"],
            np_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_python_state(value: Any) -> Any:
    # torch.load hands tuples back as lists in places; random.setstate wants tuples.
    if isinstance(value, list):
        return tuple(_as_python_state(v) for v in value)
    return value


@dataclass(frozen=True)
class LoadedCheckpoint:
    path: Path
    payload: dict[str, Any]
    fell_back_from: Path | None  # the newer file that could not be read, if any


class Checkpointer:
    def __init__(self, directory: Path, keep: int = 2) -> None:
        self.directory = directory
        self.keep = max(2, keep)

    def paths(self) -> list[Path]:
        """Checkpoint files, newest first."""
        if not self.directory.exists():
            return []
        found = [p for p in self.directory.iterdir() if CHECKPOINT_NAME.fullmatch(p.name)]
        return sorted(found, key=lambda p: p.name, reverse=True)

    def save(self, payload: dict[str, Any], step: int) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / checkpoint_file_name(step)
        tmp = self.directory / f".{final.name}.tmp"
        payload = {"format": FORMAT_VERSION, **payload}
        with open(tmp, "wb") as fh:
            torch.save(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        _fsync_dir(self.directory)
        for old in self.paths()[self.keep :]:
            old.unlink(missing_ok=True)
        return final

    def load_latest(
        self, map_location: str | torch.device = "cpu", *, mmap: bool = False
    ) -> LoadedCheckpoint | None:
        """mmap: tensors are read from the file only when used (sampling reads no optimizer)."""
        failed: Path | None = None
        for path in self.paths():
            try:
                payload = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
            except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError) as exc:
                log.warning("checkpoint %s is unreadable (%s); trying the one before it", path, exc)
                failed = failed or path
                continue
            if not isinstance(payload, dict) or "format" not in payload:
                raise TrainingError(
                    f"{path} is not a spotrun checkpoint", hint="start in a fresh --run-dir"
                )
            if payload["format"] != FORMAT_VERSION:
                raise TrainingError(
                    f"{path} has checkpoint format v{payload['format']}; this spotrun reads "
                    f"v{FORMAT_VERSION}",
                    hint="start in a fresh --run-dir, or resume with the spotrun that wrote it",
                )
            return LoadedCheckpoint(path, payload, failed)
        if failed is not None:
            raise TrainingError(
                f"no readable checkpoint in {self.directory}: the newest ({failed.name}) is "
                "damaged and there is none before it",
                hint="delete the damaged file to start from scratch",
            )
        return None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
