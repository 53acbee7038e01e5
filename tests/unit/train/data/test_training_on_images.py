"""The trainer on image data: a few steps of the fast net, and an exact resume mid-epoch."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import torch

from spotrun.recipes import get_recipe
from spotrun.train.build import build_trainer
from spotrun.train.callbacks import Callback
from spotrun.train.events import Event
from spotrun.train.state import State
from tests.unit.train.data.images import make_image_folder


class StopAt(Callback):
    """Asks for a stop, as SIGTERM would, once training reaches `step`."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_event(self, event: Event, state: State) -> None:
        if event is Event.BATCH_END and state.step == self.step:
            state.stop_signal = signal.SIGTERM


def test_resume_mid_epoch_is_exact_with_augmentation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPOTRUN_HOME", str(tmp_path / "home"))
    folder = make_image_folder(tmp_path / "set", per_class=4, size=16, suffix=".jpg").root
    recipe = get_recipe(
        "digits-fast",
        [
            f"data={folder}",
            "model=cifar-fastnet",
            'model_options={"widths": [8, 8, 8]}',
            "num_classes=3",
            "batch_size=4",
            "epochs=2",
            "threads=1",
            "data_workers=0",
            "augment.crop_padding=2",
            "augment.translate=1",
            "augment.flip=true",
        ],
    )
    for name in ("reference", "resumed"):
        (tmp_path / name).mkdir()
    reference = build_trainer(recipe, tmp_path / "reference")
    done = reference.fit()
    assert not done.interrupted and done.step == 6 and 0 <= done.metrics["test_acc"] <= 1

    first = build_trainer(recipe, tmp_path / "resumed")
    first.callbacks.append(StopAt(4))  # one batch into the second epoch
    assert first.fit().interrupted
    torch.manual_seed(12345)  # whatever the global RNG does in between must not matter
    second = build_trainer(recipe, tmp_path / "resumed")
    result = second.fit()
    assert second.resumed_from is not None and result.step == 6
    want = reference.state.model.state_dict()
    got = second.state.model.state_dict()
    assert all(torch.equal(want[k], got[k]) for k in want)
    assert result.metrics["test_loss"] == done.metrics["test_loss"]
