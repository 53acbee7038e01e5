"""`spotrun sample` on a shakespeare-fast run (the recipe's 4-layer, 128-wide GPT, 64
characters of context): seconds to the first character and to all 200, before and after
issue 34 point 8, medians of several runs, each side a fresh process.

    python bench/sample_speed.py [--repeats 5] [--tokens 200] [--data ../shared/data/tinyshakespeare.txt]

Sides, run in turn each repeat:
  before    the old path: the CLI's imports, the trainer's INIT with an optimizer (which
            imports torch's compiler), the whole checkpoint read, no key/value cache, the
            text printed when all of it is sampled
  no cache  today's loading and streaming, without the key/value cache
  after     `spotrun sample RUN --tokens N` as a user runs it (cache on)
The run is trained here for a few steps first (what it says does not change the speed).
Goal (the issue): first character under 2 s, 200 characters under 3 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _env import hardware_line, with_malloc_settings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"

# The pre-change `sample_text`, kept here so the comparison runs on the same machine.
BEFORE = """
import sys
from pathlib import Path
import spotrun.cli.main  # the CLI's own imports, as `spotrun sample` paid them
import torch
from spotrun.core.rundir import CHECKPOINTS_DIR
from spotrun.train.algorithm import Engine
from spotrun.train.checkpoint import Checkpointer
from spotrun.train.events import Event
from spotrun.train.methods import build_methods
from spotrun.train.models import build_model
from spotrun.train.sample import load_run_recipe, run_tokenizer
from spotrun.train.state import State
run_dir, tokens = Path(sys.argv[1]), int(sys.argv[2])
recipe = load_run_recipe(run_dir)
tokenizer = run_tokenizer(recipe, run_dir)
loaded = Checkpointer(run_dir / CHECKPOINTS_DIR).load_latest(map_location="cpu")
model = build_model(recipe.model, recipe.num_classes, **recipe.model_options)
state = State(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
              loss_fn=torch.nn.functional.cross_entropy, max_epochs=1, steps_per_epoch=1)
Engine(build_methods(recipe.methods)).run(Event.INIT, state)
model.load_state_dict(loaded.payload["model"])
model.eval()
idx = tokenizer.encode("\\n").view(1, -1)
out = model.generate(idx, tokens, temperature=0.8, vocab=tokenizer.vocab_size,
                     generator=torch.Generator().manual_seed(0), cache=False)
print(tokenizer.decode(out[0].tolist())[1:], flush=True)
"""

NO_CACHE = """
import sys
from pathlib import Path
import spotrun.cli.main  # the CLI's own imports
from spotrun.train.sample import sample_stream
for piece in sample_stream(Path(sys.argv[1]), tokens=int(sys.argv[2]), cache=False):
    print(piece, end="", flush=True)
print(flush=True)
"""


def timed(command: list[str]) -> tuple[float, float, str]:
    """Seconds to the first character of stdout and to the process's end, and the text."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    first = proc.stdout.read(1)
    first_s = time.perf_counter() - started
    rest = proc.stdout.read()
    stderr = proc.stderr.read() if proc.stderr is not None else b""
    code = proc.wait()
    total_s = time.perf_counter() - started
    if code != 0:
        sys.exit(f"{command[:4]} failed ({code}):\n{stderr.decode()}")
    return first_s, total_s, (first + rest).decode()


def train_run(run_dir: Path, data: Path) -> None:
    sets = [f"data={data}", "epochs=1", "text.steps_per_epoch=5", "text.eval_tokens=1024"]
    args = [arg for item in sets for arg in ("--set", item)]
    subprocess.run(
        [sys.executable, "-m", "spotrun", "train", "shakespeare-fast", "--run-dir", str(run_dir)]
        + args,
        check=True,
        capture_output=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    with_malloc_settings()
    print(hardware_line(), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / "run"
        train_run(run_dir, args.data)
        n = str(args.tokens)
        sides = {
            "before": [sys.executable, "-c", BEFORE, str(run_dir), n],
            "no cache": [sys.executable, "-c", NO_CACHE, str(run_dir), n],
            "after": [sys.executable, "-m", "spotrun", "sample", str(run_dir), "--tokens", n],
        }
        times: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        texts: dict[str, str] = {}
        for repeat in range(args.repeats):
            for side, command in sides.items():
                first_s, total_s, text = timed(command)
                times[side].append((first_s, total_s))
                texts[side] = text
                load = os.getloadavg()[0]
                print(
                    f"repeat {repeat + 1} {side:>8}: first character {first_s:5.2f} s, "
                    f"{args.tokens} tokens {total_s:5.2f} s (load average {load:.1f})",
                    flush=True,
                )
    same = len(set(texts.values())) == 1
    print(f"\nmedians of {args.repeats} ({args.tokens} tokens, seed 0, temperature 0.8):")
    print(f"{'':>10} {'first character':>16} {'all tokens':>11}")
    for side, pairs in times.items():
        first = statistics.median(p[0] for p in pairs)
        total = statistics.median(p[1] for p in pairs)
        print(f"{side:>10} {first:14.2f} s {total:9.2f} s")
    print(f"the same text on every side: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
