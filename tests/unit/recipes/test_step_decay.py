"""The step LR schedule that the baseline recipes use: its maths, its option checks, and the
trainer form landing on the exact steps of the standard 90-epoch ImageNet schedule. (Its
bitwise resume is one of the cases of tests/unit/train/test_resume_each_method.py.)"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.algorithm import Engine
from spotrun.train.events import Event
from spotrun.train.functional import step_decay_lr
from spotrun.train.methods import build_methods, validate_methods
from spotrun.train.state import State

IMAGENET_MILESTONES = [30 / 90, 60 / 90, 80 / 90]


def test_rate_drops_by_gamma_at_each_milestone() -> None:
    lr = [step_decay_lr(p, 0.4, milestones=(0.5, 0.75), gamma=0.1) for p in (0, 0.49, 0.5, 0.8)]
    assert lr == pytest.approx([0.4, 0.4, 0.04, 0.004])
    assert step_decay_lr(1.0, 1.0, milestones=IMAGENET_MILESTONES) == pytest.approx(1e-3)
    assert step_decay_lr(0.3, 2.0, milestones=[]) == 2.0  # no milestones: constant


def test_warmup_rises_linearly_from_zero_then_holds() -> None:
    assert step_decay_lr(0.0, 0.8, warmup_frac=0.1) == 0.0
    assert step_decay_lr(0.05, 0.8, warmup_frac=0.1) == pytest.approx(0.4)
    assert step_decay_lr(0.1, 0.8, warmup_frac=0.1) == pytest.approx(0.8)
    assert step_decay_lr(0.3, 0.8, warmup_frac=0.1) == pytest.approx(0.8)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"milestones": [0.75, 0.5]}, "increasing fractions"),
        ({"milestones": [0.5, 1.0]}, "strictly between 0 and 1"),
        ({"milestones": [0.2], "warmup_frac": 0.3}, "at or before the first milestone"),
        ({"gamma": 1.5}, "gamma"),
    ],
)
def test_bad_options_are_refused(options: dict[str, object], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        validate_methods({"step_decay": options})


def test_conflicts_with_the_other_schedules() -> None:
    for other in ("one_cycle", "warmup_decay"):
        with pytest.raises(UsageError, match="cannot be used together"):
            validate_methods({"step_decay": {}, other: {}})


def test_trainer_form_drops_on_the_first_step_of_epochs_31_61_81() -> None:
    steps_per_epoch = 5005  # ImageNet at 256 images per step
    model = nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    state = State(model, opt, nn.functional.cross_entropy, 90, steps_per_epoch)
    (algorithm,) = build_methods({"step_decay": {"milestones": IMAGENET_MILESTONES}})
    engine = Engine([algorithm])

    def lr_at_epoch_start(epoch: int, offset: int = 0) -> float:
        state.step = epoch * steps_per_epoch + offset
        engine.run(Event.BATCH_START, state)
        return float(opt.param_groups[0]["lr"])

    assert lr_at_epoch_start(30, -1) == pytest.approx(0.1)
    assert lr_at_epoch_start(30) == pytest.approx(0.01)
    assert lr_at_epoch_start(60, -1) == pytest.approx(0.01)
    assert lr_at_epoch_start(60) == pytest.approx(0.001)
    assert lr_at_epoch_start(80, -1) == pytest.approx(0.001)
    assert lr_at_epoch_start(80) == pytest.approx(0.0001)
    assert opt.param_groups[0]["initial_lr"] == 0.1  # the peak is kept for a resume
