"""gpt2-small-fast at tiny size through the real CLI: on the local cloud from a text file
(GPT-2 tokens made when the run starts) then `spotrun sample`; and in the lab from token files
made by `data push TEXT --tokenizer gpt2` on moto S3 and staged by the job on its host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotlab import Lab
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

VERSE = "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate.\n"
# GPT-2 small shrunk to 1 layer of 32 (the 50,257-token embedding stays: 1.6M parameters).
TINY = [
    "model_options.n_layer=1",
    "model_options.n_head=2",
    "model_options.n_embd=32",
    "model_options.block_size=16",
    "text.block_size=16",
    "text.steps_per_epoch=3",
    "text.eval_tokens=128",
    "epochs=2",
    "batch_size=4",
    "eval_batch_size=4",
    "resources.gpus=0",
    "threads=1",
]


def _sets(*items: str) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def _metrics(run_dir: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_launch_gpt2_small_fast_from_a_text_then_sample(env: Env, tmp_path: Path) -> None:
    text = tmp_path / "verse.txt"
    text.write_text(VERSE * 40)
    proc = env.cli("launch", "gpt2-small-fast", *_sets(f"data={text}", *TINY), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run,) = env.runs()
    assert run["state"] == "succeeded" and run["recipe"] == "gpt2-small-fast"
    run_dir = env.home / "runs" / run["id"]
    rows = _metrics(run_dir)
    assert [r["step"] for r in rows] == [3, 6]
    for row in rows:
        assert {"test_loss", "test_perplexity", "test_loss_per_char"} <= set(row)
        assert row["test_loss"] < 11.5  # ln(50,304) = 10.83 at the start: nats per GPT-2 token
    recipe = json.loads((run_dir / "recipe.json").read_text())
    assert recipe["text"]["tokenizer"] == "gpt2" and recipe["num_classes"] == 50_304

    sampled = env.cli("sample", run["name"], "--prompt", "Shall I", "--tokens", "12", check=True)
    assert sampled.stdout.startswith("Shall I") and len(sampled.stdout) > len("Shall I")


def test_lab_push_gpt2_tokens_then_a_run_stages_and_trains_on_them(
    aws_env: Env, lab: Lab, tmp_path: Path
) -> None:
    env = aws_env
    text = tmp_path / "verse.txt"
    text.write_text(VERSE * 40)
    uri = f"s3://{lab.bucket}/text/verse"
    pushed = env.cli("data", "push", str(text), uri, "--tokenizer", "gpt2", check=True)
    assert f"pushed {uri}" in pushed.stdout and f"--set data={uri}" in pushed.stdout

    run_id = env.cli(
        "launch", "gpt2-small-baseline", "--cloud", "aws", "-d", *_sets(f"data={uri}", *TINY),
        check=True,
    ).stdout.strip()  # fmt: skip

    def ended() -> bool:
        status = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
        return str(status["state"]) in ("succeeded", "failed")

    wait_for(ended, timeout=240, what="the run to end")
    status = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    events = [e["message"] for e in status["events"]]
    assert status["state"] == "succeeded", (status["message"], events)
    assert status["metrics"]["epoch"] == 2 and status["metrics"]["test_loss"] < 11.5
    (item,) = lab.instances(run_id)
    host = lab.hosts.of(item["InstanceId"])
    staged = host.path(f"/root/.spotrun/spotrun-data/{lab.bucket}/text/verse")
    assert (staged / "train" / "tokens.json").is_file() and (
        staged / "val" / "tokens.json"
    ).is_file()
    log = env.cli("logs", run_id, check=True).stdout
    assert f"spotrun: staging {uri} to the root volume" in log
