"""shakespeare-fast end to end on the local cloud through the real CLI (tiny settings), then
`spotrun sample` on the finished run: real tmux, real torch, the run's own checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Env

pytestmark = pytest.mark.slow

VERSE = "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate.\n"
TINY = [
    'model_options={"block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 16}',
    "text.block_size=16",
    "text.steps_per_epoch=3",
    "text.eval_tokens=256",
    "epochs=2",
    "batch_size=4",
]


def test_launch_shakespeare_fast_then_sample(env: Env, tmp_path: Path) -> None:
    text = tmp_path / "verse.txt"
    text.write_text(VERSE * 30)
    sets = [arg for item in (f"data={text}", *TINY) for arg in ("--set", item)]
    proc = env.cli("launch", "shakespeare-fast", *sets, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run,) = env.runs()
    assert run["state"] == "succeeded" and run["recipe"] == "shakespeare-fast"
    run_dir = env.home / "runs" / run["id"]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [3, 6]
    for row in rows:
        assert {"test_loss", "test_perplexity", "test_loss_per_char", "test_acc"} <= set(row)
    trace = {row["algorithm"] for row in json.loads((run_dir / "trace.json").read_text())}
    assert {"rotary", "rms_norm", "qk_norm", "weight_tying", "seq_len_warmup"} <= trace

    sampled = env.cli("sample", run["name"], "--prompt", "Thou", "--tokens", "25", check=True)
    line = sampled.stdout.removesuffix("\n")  # print's own line end; the sample may hold more
    assert line.startswith("Thou") and len(line) == len("Thou") + 25
    assert set(line) <= set(VERSE)  # char tokens: only the text's own characters

    bad = env.cli("sample", run["name"], "--prompt", "Zebra#")
    assert bad.returncode != 0 and "outside the vocabulary" in bad.stderr
