"""`spotrun sample`'s loading on a run trained here (shakespeare-fast, tiny): only the model
and its GPT surgery are built, no trainer or optimizer (whose first use imports torch's
compiler, ~2 s), the cached text is the uncached text, and a small model is sampled on one
thread, with the same text as on the caller's threads, which it gets back afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from spotrun.recipes import get_recipe
from spotrun.train.build import train_recipe

VERSE = "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate.\n"
TINY = [
    'model_options={"block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 16}',
    "text.block_size=16",
    "text.steps_per_epoch=2",
    "text.eval_tokens=64",
    "epochs=1",
    "batch_size=4",
    "threads=1",
]

# A fresh interpreter: what sampling imports, the text with and without the cache, the
# threads torch samples on and those the caller has after, and the text of the model's own
# generate on the caller's two threads.
CHILD = """
import json, sys
from pathlib import Path
import torch
from spotrun.train.sample import load_model, load_run_recipe, run_tokenizer, sample_stream
torch.set_num_threads(2)
run_dir = Path(sys.argv[1])
pieces = sample_stream(run_dir, prompt="Thou", tokens=40, cache=True)
cached = next(pieces)
threads_while = torch.get_num_threads()
cached += "".join(pieces)
heavy = [m for m in ("torch._dynamo",) if m in sys.modules]
uncached = "".join(sample_stream(run_dir, prompt="Thou", tokens=40, cache=False))
recipe = load_run_recipe(run_dir)
tokenizer = run_tokenizer(recipe, run_dir)
ids = tokenizer.encode("Thou").view(1, -1)
out = load_model(run_dir, recipe).generate(ids, 40, temperature=0.8,
    vocab=tokenizer.vocab_size, generator=torch.Generator().manual_seed(0))
print(json.dumps({"cached": cached, "uncached": uncached, "heavy": heavy,
    "threads_while": threads_while, "threads_after": torch.get_num_threads(),
    "two_threads": tokenizer.decode(out[0].tolist())}))
"""


def test_sampling_builds_no_trainer_and_no_cache_or_thread_changes_a_character(
    tmp_path: Path,
) -> None:
    text = tmp_path / "verse.txt"
    text.write_text(VERSE * 30)
    run_dir = tmp_path / "run"
    train_recipe(get_recipe("shakespeare-fast", [f"data={text}", *TINY]), run_dir)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(run_dir)], capture_output=True, text=True, check=True
    )
    answer = json.loads(child.stdout)
    assert answer["heavy"] == []
    assert answer["cached"] == answer["uncached"] == answer["two_threads"]
    assert answer["threads_while"] == 1 and answer["threads_after"] == 2
    assert answer["cached"].startswith("Thou") and len(answer["cached"]) == len("Thou") + 40
