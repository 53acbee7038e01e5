"""For every method: a small model trains with it on, and a run stopped by SIGTERM at a step and
resumed in a fresh Trainer ends bitwise identical (weights, optimizer, method state, metrics,
RNG) to one never stopped. One straight run and one stopped run per method, on the CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from spotrun.train.methods import CATALOG
from spotrun.train.methods.catalog import LANGUAGE_METHODS
from spotrun.train.trainer import Trainer
from spotrun.train.wrapping import unwrap_model
from tests.unit.train.tiny import CLASSES, StopAt, make_trainer

EPOCHS = 2  # 12 steps
# Where each case is stopped, in turn: mid second epoch (one evaluation and one epoch-end
# checkpoint before it), at the end of the first epoch (before its evaluation), mid first
# epoch, and one step before the end.
STOP_POINTS = (7, 6, 3, 11)

# Options that make each method act within 12 steps of the tiny task.
CASES: dict[str, dict[str, dict[str, Any]]] = {
    "one_cycle": {"one_cycle": {}},
    "warmup_decay": {"warmup_decay": {"warmup_frac": 0.2}},
    "step_decay": {"step_decay": {"milestones": [0.4, 0.75], "warmup_frac": 0.2}},
    "patch_whitening": {"patch_whitening": {"num_images": 32}},
    "blurpool": {"blurpool": {"min_channels": 1}},
    "concat_pooling": {"concat_pooling": {}},
    "zero_init_residual": {"zero_init_residual": {}},
    "stochastic_depth": {"stochastic_depth": {"drop_rate": 0.5}},
    "stochastic_depth_block": {"stochastic_depth": {"drop_rate": 0.5, "mode": "block"}},
    "no_decay_norm_bias": {"no_decay_norm_bias": {}},
    "layer_freezing": {"layer_freezing": {"start_frac": 0.3, "freeze_level": 0.9}},
    "progressive_resizing": {
        "progressive_resizing": {
            "initial_scale": 0.67,
            "finish_frac": 0.5,
            "buckets": 3,
            "size_multiple": 2,
        }
    },
    "selective_backprop": {"selective_backprop": {"start_frac": 0.2, "interval": 1}},
    "mixup": {"mixup": {"alpha": 0.4}},
    "cutmix": {"cutmix": {}},
    "cutout": {"cutout": {}},
    "colout": {"colout": {}},
    "label_smoothing": {"label_smoothing": {}},
    "channels_last": {"channels_last": {"when": "always"}},
    "sam": {"sam": {"interval": 2}},
    "grad_clipping": {"grad_clipping": {"threshold": 0.5}},
    "grad_clipping_value": {"grad_clipping": {"mode": "value", "threshold": 0.01}},
    "mixed_precision": {"mixed_precision": {"precision": "bf16"}},
    "ema": {"ema": {"decay": 0.8}},
    "swa": {"swa": {"start_frac": 0.4}},
    "agc": {"agc": {"clipping": 0.02}},
    "ghost_batchnorm": {"ghost_batchnorm": {"ghost_batch_size": 4}},
    "weight_standardization": {"weight_standardization": {}},
    "randaugment": {"randaugment": {}},
    "augmix": {"augmix": {"width": 2, "max_depth": 2}},
    "factorize": {"factorize": {"min_channels": 16}},
    "squeeze_excite": {"squeeze_excite": {"min_channels": 16, "latent_channels": 0.25}},
    "tta": {"tta": {"translate": 1}},
    # The eager backend runs dynamo's tracing and graph breaks without compiling kernels, so
    # the wrapping, unwrapping and checkpointing are what is tested, with bitwise results.
    "compile": {"compile": {"backend": "eager", "when": "always"}},
    "everything_compatible": {
        "one_cycle": {},
        "blurpool": {"min_channels": 1},
        "zero_init_residual": {},
        "stochastic_depth": {},
        "no_decay_norm_bias": {},
        "progressive_resizing": {"finish_frac": 0.5, "buckets": 2, "size_multiple": 2},
        "selective_backprop": {"start_frac": 0.3, "interval": 3},
        "cutmix": {},
        "label_smoothing": {},
        "channels_last": {"when": "always"},
        "sam": {"interval": 2},
        "grad_clipping": {},
        "mixed_precision": {"precision": "bf16"},
        "ema": {"decay": 0.8},
        "tta": {},
    },
}


def test_every_catalog_method_has_a_case() -> None:
    # The language-model methods need the GPT: tests/unit/train/test_lm_methods.py has theirs.
    covered = {name for case in CASES.values() for name in case}
    assert covered == {m.name for m in CATALOG} - LANGUAGE_METHODS


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k != "elapsed_s"} for row in rows]


def _assert_same_tensors(a: Any, b: Any, where: str) -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            _assert_same_tensors(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same_tensors(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _final_state(trainer: Trainer) -> dict[str, Any]:
    return {
        "model": unwrap_model(trainer.state.model).state_dict(),
        "optimizer": trainer.state.optimizer.state_dict(),
        "algorithms": trainer.engine.state_dict(),
        "rng": torch.get_rng_state(),
        "position": trainer.state.position(),
    }


def _run_straight(methods: dict[str, dict[str, Any]], run_dir: Path) -> Trainer:
    trainer = make_trainer(methods, run_dir, epochs=EPOCHS)
    result = trainer.fit()
    assert not result.interrupted and result.step == EPOCHS * 6
    return trainer


def _stop_and_resume(methods: dict[str, dict[str, Any]], run_dir: Path, stop_at: int) -> Trainer:
    first = make_trainer(methods, run_dir, epochs=EPOCHS, callbacks=[StopAt(stop_at)])
    stopped = first.fit()
    assert stopped.interrupted and stopped.step == stop_at
    assert first.state.stop_signal is not None

    second = make_trainer(methods, run_dir, epochs=EPOCHS)
    resumed = second.fit()
    assert second.resumed_from is not None and second.resumed_from.name == f"ckpt-{stop_at:09d}.pt"
    assert not resumed.interrupted and resumed.step == EPOCHS * 6
    return second


def _without_fit_start(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # The trace covers the whole run across the restart; only fit_start runs once more.
    return [r for r in rows if r["event"] != "fit_start"]


@pytest.mark.parametrize("case", list(CASES))
def test_trains_and_resumes_bitwise(case: str, tmp_path: Path) -> None:
    methods = CASES[case]
    stop_at = STOP_POINTS[list(CASES).index(case) % len(STOP_POINTS)]
    straight_dir, stopped_dir = tmp_path / "straight", tmp_path / "stopped"

    straight = _run_straight(methods, straight_dir)
    ran = {row["algorithm"] for row in straight.engine.summary()}
    assert ran == set(methods), f"methods that never acted: {set(methods) - ran}"
    rows = _metrics(straight_dir)
    assert len(rows) == EPOCHS
    assert all(math.isfinite(v) for row in rows for v in row.values())
    # It trains: after 12 steps the tiny task is learned well past chance (1/CLASSES).
    assert rows[-1]["test_acc"] > 1.5 / CLASSES, rows

    second = _stop_and_resume(methods, stopped_dir, stop_at)
    _assert_same_tensors(_final_state(second), _final_state(straight), case)
    assert _metrics(stopped_dir) == rows
    assert _without_fit_start(second.engine.summary()) == _without_fit_start(
        straight.engine.summary()
    )


def test_stopped_at_any_step_resumes_bitwise(tmp_path: Path) -> None:
    """The richest compatible combination, stopped after each step in turn."""
    methods = CASES["everything_compatible"]
    straight = _run_straight(methods, tmp_path / "straight")
    expected, rows = _final_state(straight), _metrics(tmp_path / "straight")
    for stop_at in range(1, EPOCHS * 6):
        run_dir = tmp_path / f"stopped-{stop_at}"
        second = _stop_and_resume(methods, run_dir, stop_at)
        _assert_same_tensors(_final_state(second), expected, f"stopped at {stop_at}")
        assert _metrics(run_dir) == rows, f"stopped at {stop_at}"
