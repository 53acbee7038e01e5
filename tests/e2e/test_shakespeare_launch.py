"""shakespeare-fast end to end through the real CLI (tiny settings), then `spotrun sample` on
the finished run: on the local cloud from a text file (real tmux, real torch, the run's own
checkpoint), and in the lab from char tokens made by `data push TEXT --tokenizer char` on moto
S3, staged by the job on its host; the laptop samples with the run's synced vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotlab import Lab
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

VERSE = "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate.\n"
TINY = [
    # Shrunk key by key, so the recipe's own model options (ReLU-squared, untied head) stay on.
    "model_options.block_size=16",
    "model_options.n_layer=1",
    "model_options.n_head=2",
    "model_options.n_embd=16",
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
    assert {"rotary", "rms_norm", "qk_norm", "grad_clipping", "seq_len_warmup"} <= trace

    sampled = env.cli("sample", run["name"], "--prompt", "Thou", "--tokens", "25", check=True)
    line = sampled.stdout.removesuffix("\n")  # print's own line end; the sample may hold more
    assert line.startswith("Thou") and len(line) == len("Thou") + 25
    assert set(line) <= set(VERSE)  # char tokens: only the text's own characters

    bad = env.cli("sample", run["name"], "--prompt", "Zebra#")
    assert bad.returncode != 0 and "outside the vocabulary" in bad.stderr


def test_lab_pushed_char_tokens_train_shakespeare_fast_there_and_sample_here(
    aws_env: Env, lab: Lab, tmp_path: Path
) -> None:
    env = aws_env
    text = tmp_path / "verse.txt"
    text.write_text(VERSE * 30)
    uri = f"s3://{lab.bucket}/text/shakespeare"
    pushed = env.cli("data", "push", str(text), uri, "--tokenizer", "char", check=True)
    assert f"as char tokens ({len(set(VERSE))} characters)" in pushed.stdout
    sets = [arg for item in (f"data={uri}", *TINY, "threads=1") for arg in ("--set", item)]
    run_id = env.cli(
        "launch", "shakespeare-fast", "--cloud", "aws", "-d", *sets, check=True
    ).stdout.strip()

    def ended() -> bool:
        status = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
        return str(status["state"]) in ("succeeded", "failed")

    wait_for(ended, timeout=240, what="the run to end")
    status = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    assert status["state"] == "succeeded", (status["message"], status["events"])
    assert status["metrics"]["epoch"] == 2 and "test_loss_per_char" in status["metrics"]
    (item,) = lab.instances(run_id)
    assert item["State"]["Name"] == "terminated"
    staged = lab.hosts.of(item["InstanceId"]).path(
        f"/root/.spotrun/spotrun-data/{lab.bucket}/text/shakespeare"
    )
    assert json.loads((staged / "train" / "tokens.json").read_text())["vocab"] == "".join(
        sorted(set(VERSE))
    )
    assert (
        f"spotrun: staging {uri} to the root volume" in env.cli("logs", run_id, check=True).stdout
    )

    # This machine has no text file for the run: sample decodes with its synced vocabulary.
    assert (env.home / "runs" / run_id / "vocabulary.json").is_file()
    sampled = env.cli("sample", run_id, "--prompt", "Thou", "--tokens", "20", check=True)
    line = sampled.stdout.removesuffix("\n")
    assert line.startswith("Thou") and len(line) == len("Thou") + 20
    assert set(line) <= set(VERSE)
