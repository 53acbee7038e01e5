from __future__ import annotations

from pathlib import Path

import pytest
import torch

from spotrun.core.errors import TrainingError
from spotrun.train.algorithm import AlgorithmBase, Engine
from spotrun.train.checkpoint import Checkpointer
from spotrun.train.events import Event
from spotrun.train.functional import (
    one_cycle_lr,
    one_cycle_momentum,
    smooth_labels,
    warmup_decay_lr,
)


def test_one_cycle_shape() -> None:
    peak = 1.0
    assert one_cycle_lr(0.0, peak, start_div=25) == pytest.approx(0.04)
    assert one_cycle_lr(0.25, peak, warmup_frac=0.25) == pytest.approx(peak)
    assert one_cycle_lr(1.0, peak, final_div=1e4) == pytest.approx(1e-4)
    xs = [i / 100 for i in range(101)]
    lrs = [one_cycle_lr(x, peak) for x in xs]
    peak_at = lrs.index(max(lrs))
    assert all(a <= b for a, b in zip(lrs[:peak_at], lrs[1 : peak_at + 1]))
    assert all(a >= b for a, b in zip(lrs[peak_at:], lrs[peak_at + 1 :]))
    assert one_cycle_momentum(0.25) == pytest.approx(0.85) and one_cycle_momentum(
        0.0
    ) == pytest.approx(0.95)


def test_warmup_then_decay() -> None:
    assert warmup_decay_lr(0.0, 2.0, warmup_frac=0.1) == 0.0
    assert warmup_decay_lr(0.05, 2.0, warmup_frac=0.1) == pytest.approx(1.0)
    assert warmup_decay_lr(0.55, 2.0, warmup_frac=0.1, decay="linear") == pytest.approx(1.0)
    assert warmup_decay_lr(0.55, 2.0, warmup_frac=0.1) == pytest.approx(1.0)  # cosine midpoint
    assert warmup_decay_lr(1.0, 2.0, final_frac=0.1) == pytest.approx(0.2)


def test_smooth_labels_rows_sum_to_one() -> None:
    t = torch.tensor([0, 3])
    soft = smooth_labels(t, 4, 0.2)
    assert torch.allclose(soft.sum(1), torch.ones(2))
    assert soft[0, 0] == pytest.approx(0.8 + 0.05) and soft[0, 1] == pytest.approx(0.05)
    again = smooth_labels(soft, 4, 0.0)
    assert torch.equal(again, soft)


class Recorder(AlgorithmBase):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.events = frozenset({Event.BEFORE_FORWARD, Event.AFTER_FORWARD})

    def apply(self, event: Event, state: object) -> None:
        self.log.append(f"{event.value}:{self.name}")


def test_engine_order_reverses_on_after_events() -> None:
    log: list[str] = []
    engine = Engine([Recorder("a", log), Recorder("b", log)])
    state = type("S", (), {"step": 7})()
    engine.run(Event.BEFORE_FORWARD, state)  # type: ignore[arg-type]
    engine.run(Event.AFTER_FORWARD, state)  # type: ignore[arg-type]
    engine.run(Event.EPOCH_START, state)  # type: ignore[arg-type]
    assert log == ["before_forward:a", "before_forward:b", "after_forward:b", "after_forward:a"]
    assert [(t.event, t.step, t.algorithm) for t in engine.trace][0] == (
        Event.BEFORE_FORWARD,
        7,
        "a",
    )
    assert (
        Event.EPOCH_END.is_after
        and Event.EVAL_AFTER_FORWARD.is_after
        and not Event.BATCH_START.is_after
    )


def test_checkpoint_falls_back_when_newest_is_truncated(tmp_path: Path) -> None:
    ck = Checkpointer(tmp_path)
    ck.save({"value": torch.arange(1000)}, step=10)
    ck.save({"value": torch.arange(2000)}, step=20)
    newest = ck.paths()[0]
    newest.write_bytes(newest.read_bytes()[:300])  # torn write
    loaded = ck.load_latest()
    assert loaded is not None and loaded.path.name == "ckpt-000000010.pt"
    assert loaded.fell_back_from == newest
    assert torch.equal(loaded.payload["value"], torch.arange(1000))


def test_checkpoint_keeps_two_and_only_damaged_is_an_error(tmp_path: Path) -> None:
    ck = Checkpointer(tmp_path)
    for step in (1, 2, 3):
        ck.save({"s": step}, step=step)
    assert [p.name for p in ck.paths()] == ["ckpt-000000003.pt", "ckpt-000000002.pt"]
    for p in ck.paths():
        p.write_bytes(b"garbage")
    with pytest.raises(TrainingError, match="no readable checkpoint"):
        ck.load_latest()
