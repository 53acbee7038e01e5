"""`spotrun train` and `spotrun methods` through the real command line: methods switched on
with --set, bad combinations refused before anything is written, a damaged checkpoint.
(Every other refusal is tested in tests/unit/train/test_engine.py, without process start-ups.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Env
from tests.e2e.test_bad_input import assert_one_line_error

pytestmark = pytest.mark.slow

KEPT_NAMES = {
    "one_cycle", "warmup_decay", "step_decay", "progressive_resizing", "mixed_precision",
    "channels_last", "label_smoothing", "blurpool", "ema", "mixup", "cutmix", "cutout", "colout",
    "stochastic_depth", "sam", "selective_backprop", "layer_freezing", "grad_clipping", "tta",
    "no_decay_norm_bias", "zero_init_residual", "concat_pooling", "patch_whitening", "compile",
    # the language-model methods
    "rotary", "alibi", "rms_norm", "swiglu", "qk_norm", "weight_tying", "fused_attention",
    "seq_len_warmup",
    # Composer's methods added for issue 35
    "agc", "swa", "ghost_batchnorm", "weight_standardization", "squeeze_excite",
    "low_precision_norm", "randaugment", "augmix", "factorize",
}  # fmt: skip


def test_methods_lists_the_catalog(env: Env) -> None:
    rows = json.loads(env.cli("methods", "--json", check=True).stdout)
    assert {r["name"] for r in rows} == KEPT_NAMES
    mixup = next(r for r in rows if r["name"] == "mixup")
    assert mixup["conflicts"] == ["cutmix"]
    assert mixup["options"][0]["name"] == "alpha" and mixup["options"][0]["default"] == 0.2
    assert "spotrun.train.functional.mixup_batch" in mixup["functional"]
    text = env.cli("methods", check=True).stdout
    assert "ema: exponential moving average" in text and "decay = 0.999" in text


@pytest.mark.parametrize(
    ("sets", "fragments"),
    [
        (
            ["methods.mixup={}", "methods.cutmix={}"],
            ["methods mixup and cutmix cannot be used together"],
        ),
        # digits-net has no residual blocks: refused when the model is built, before any file.
        (["methods.zero_init_residual={}"], ["zero_init_residual found no ResidualBlock"]),
    ],
)
def test_train_refuses_bad_methods_writing_nothing(
    env: Env, tmp_path: Path, sets: list[str], fragments: list[str]
) -> None:
    run_dir = tmp_path / "run"
    args = [arg for s in sets for arg in ("--set", s)]
    proc = env.cli("train", "digits-fast", "--run-dir", str(run_dir), *args)
    assert_one_line_error(proc, 2, *fragments)
    assert not run_dir.exists()


def test_train_with_methods_and_a_damaged_checkpoint(env: Env, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [
        "train", "digits-fast", "--run-dir", str(run_dir), "--set", "threads=1",
        "--set", "methods.ema={\"decay\": 0.9}", "--set", "methods.blurpool={\"min_channels\": 1}",
        "--set", "methods.concat_pooling={}", "--set", "methods.tta={}",
    ]  # fmt: skip
    first = env.cli(*args, "--set", "epochs=2", check=True)
    assert "methods: one_cycle, blurpool, concat_pooling, label_smoothing, ema, tta" in first.stdout
    trace = json.loads((run_dir / "trace.json").read_text())
    assert {r["algorithm"] for r in trace} == {
        "one_cycle", "blurpool", "concat_pooling", "label_smoothing", "ema", "tta",
    }  # fmt: skip
    newest = sorted((run_dir / "checkpoints").glob("ckpt-*.pt"))[-1]
    newest.write_bytes(newest.read_bytes()[:2000])  # torn by a crash mid-write

    again = env.cli(*args, "--set", "epochs=3", check=True)
    assert f"checkpoint {newest.name} is damaged; resuming from the previous one" in again.stdout
    assert "resuming with changed settings: epochs (2 -> 3)" in again.stdout
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    assert rows[-1]["test_acc"] > 0.3  # it learns (chance is 0.1); the schedule was stretched
