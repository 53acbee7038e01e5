"""`spotrun sample`'s loading on a run trained here (shakespeare-fast, tiny): only the model
and its GPT surgery are built, no trainer or optimizer (whose first use imports torch's
compiler, ~2 s), and the cached text is the uncached text."""

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

# A fresh interpreter: what sampling imports, and the text with and without the cache.
CHILD = """
import json, sys
from pathlib import Path
from spotrun.train.sample import sample_text
run_dir = Path(sys.argv[1])
cached = sample_text(run_dir, prompt="Thou", tokens=40, cache=True)
heavy = [m for m in ("torch._dynamo",) if m in sys.modules]
uncached = sample_text(run_dir, prompt="Thou", tokens=40, cache=False)
print(json.dumps({"cached": cached, "uncached": uncached, "heavy": heavy}))
"""


def test_sampling_builds_no_trainer_and_the_cache_changes_no_character(tmp_path: Path) -> None:
    text = tmp_path / "verse.txt"
    text.write_text(VERSE * 30)
    run_dir = tmp_path / "run"
    train_recipe(get_recipe("shakespeare-fast", [f"data={text}", *TINY]), run_dir)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(run_dir)], capture_output=True, text=True, check=True
    )
    answer = json.loads(child.stdout)
    assert answer["heavy"] == []
    assert answer["cached"] == answer["uncached"]
    assert answer["cached"].startswith("Thou") and len(answer["cached"]) == len("Thou") + 40
