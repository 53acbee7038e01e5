"""progress.json from a real (tiny) training run, and the progress line made from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spotrun.cli.follow_view import progress_line
from spotrun.core.rundir import PROGRESS_FILE
from spotrun.train.callbacks import Callback
from spotrun.train.events import Event
from spotrun.train.progress import ProgressFile
from spotrun.train.state import State
from tests.unit.train.tiny import BATCH, TRAIN, make_trainer


class Ticks:
    """A clock that moves 0.25 s each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


class Seen(Callback):
    """What progress.json says at the end of each step (read after ProgressFile ran)."""

    def __init__(self, path: Path) -> None:
        self.path, self.records = path, []  # type: ignore[var-annotated]

    def on_event(self, event: Event, state: State) -> None:
        if event is Event.BATCH_END:
            self.records.append((state.step, json.loads(self.path.read_text())))


def _train(tmp_path: Path, every_s: float) -> tuple[list[tuple[int, dict[str, Any]]], Path]:
    path = tmp_path / PROGRESS_FILE
    seen = Seen(path)
    progress = ProgressFile(path, every_s=every_s, clock=Ticks())
    make_trainer({}, tmp_path, epochs=2, callbacks=[progress, seen]).fit()
    return seen.records, path


def test_progress_is_rewritten_at_most_every_interval_and_ends_done(tmp_path: Path) -> None:
    every_step, path = _train(tmp_path / "a", every_s=0.0)
    assert [record["step"] for _, record in every_step] == [step for step, _ in every_step]
    steps = TRAIN // BATCH
    final = json.loads(path.read_text())
    assert final["phase"] == "done" and final["step"] == final["steps"] == 2 * steps
    assert (final["epoch"], final["epochs"], final["batches"]) == (2, 2, steps)
    assert final["unit"] == "images" and final["eta_s"] == 0.0
    assert final["per_s"] == BATCH / 0.25  # a step each 0.25 s of the clock
    assert 0.0 <= final["test_acc"] <= 1.0

    # Rate-limited: with a long interval the file only moves at the epoch's edges.
    rare, _ = _train(tmp_path / "b", every_s=1e9)
    assert {record["step"] for _, record in rare} == {0, steps}


def test_progress_line_names_epoch_step_speed_eta_accuracy_and_cost() -> None:
    record = {
        "phase": "train", "epoch": 3, "epochs": 12, "batch": 7, "batches": 23, "per_s": 1234.4,
        "unit": "images", "eta_s": 125.0, "at": 1000.0, "test_acc": 0.9712,
    }  # fmt: skip
    line = progress_line(record, 0.0123, now=1005.0)
    assert line == "epoch 3/12  step 7/23  1,234 img/s  ETA 2m00s  acc 97.1%  $0.01 so far"
    evaluating = progress_line({**record, "phase": "eval", "eta_s": None}, None, now=0.0)
    assert evaluating == "epoch 3/12  evaluating  1,234 img/s  acc 97.1%"


def test_progress_changes_nothing_of_the_training(tmp_path: Path) -> None:
    plain = make_trainer({}, tmp_path / "plain", epochs=1).fit()
    path = tmp_path / "watched" / PROGRESS_FILE
    watched = make_trainer({}, tmp_path / "watched", epochs=1, callbacks=[ProgressFile(path)])
    same = {k: v for k, v in watched.fit().metrics.items() if k != "elapsed_s"}
    assert same == {k: v for k, v in plain.metrics.items() if k != "elapsed_s"}  # bitwise
