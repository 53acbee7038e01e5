"""A tiny, learnable image task and a trainer factory for testing methods in seconds."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from spotrun.core.rundir import METRICS_FILE
from spotrun.recipes import get_recipe
from spotrun.train.build import seed_everything
from spotrun.train.callbacks import Callback, MetricsFile
from spotrun.train.data.memory import TensorBatches
from spotrun.train.events import Event
from spotrun.train.methods import build_methods
from spotrun.train.models.small import SmallResNet
from spotrun.train.state import State
from spotrun.train.trainer import Trainer

CLASSES = 4
SIDE = 12
TRAIN, TEST, BATCH = 48, 24, 8  # 6 steps per epoch


def tiny_data(seed: int = 0) -> tuple[TensorBatches, TensorBatches]:
    """Noise images whose class decides their colour (classes 0-2 one bright channel, class 3
    all dark): learnable in a few steps, and unchanged in class by the crops, cut-outs, mirror
    images and shifts that the methods apply."""
    gen = torch.Generator().manual_seed(1234)
    n = TRAIN + TEST
    labels = torch.arange(n) % CLASSES
    images = torch.randn(n, 3, SIDE, SIDE, generator=gen)
    for cls in range(3):
        images[labels == cls, cls] += 1.0
    images[labels == 3] -= 1.0
    train = TensorBatches(images[:TRAIN], labels[:TRAIN], BATCH, shuffle=True, seed=seed)
    test = TensorBatches(images[TRAIN:], labels[TRAIN:], 16, shuffle=False)
    return train, test


class StopAt(Callback):
    """Sends this process a real SIGTERM after step `step`, as a spot notice would."""

    def __init__(self, step: int, signum: int = signal.SIGTERM) -> None:
        self.step = step
        self.signum = signum

    def on_event(self, event: Event, state: State) -> None:
        if event is Event.BATCH_END and state.step == self.step:
            os.kill(os.getpid(), self.signum)


def make_trainer(
    methods: Mapping[str, Mapping[str, Any] | None],
    run_dir: Path | None,
    *,
    epochs: int = 2,
    callbacks: list[Callback] | None = None,
    lr: float = 0.05,
    model: torch.nn.Module | None = None,
    checkpoint_every_steps: int | None = None,
) -> Trainer:
    seed_everything(0)
    train, test = tiny_data()
    algorithms = build_methods(methods)
    net = model if model is not None else SmallResNet(num_classes=CLASSES, width=8)
    optimizer = torch.optim.SGD(
        net.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4
    )
    metrics: list[Callback] = [MetricsFile(run_dir / METRICS_FILE)] if run_dir else []
    return Trainer(
        model=net,
        optimizer=optimizer,
        train_data=train,
        eval_data=test,
        max_epochs=epochs,
        algorithms=algorithms,
        callbacks=[*metrics, *(callbacks or [])],
        checkpoint_dir=run_dir / "checkpoints" if run_dir else None,
        checkpoint_every_steps=checkpoint_every_steps,
        config={"recipe": "tiny", "resolved": {"methods": dict(methods)}},
    )


def tiny_shakespeare_fast(folder: Path, *overrides: str) -> Any:
    """shakespeare-fast shrunk to train two epochs of four steps in seconds on a repeated line
    (`overrides` after the shrinking: the model's size, the optimizer)."""
    corpus = folder / "verse.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog.\n" * 60)
    return get_recipe(
        "shakespeare-fast",
        [
            f"data={corpus}",
            "num_classes=32",
            "epochs=2",
            "batch_size=8",
            "text.block_size=16",
            "text.steps_per_epoch=4",
            "text.eval_tokens=512",
            'methods.seq_len_warmup={"min_len": 8, "duration_frac": 0.3, "multiple": 8}',
            *overrides,
        ],
    )
