"""`spotrun sample` on a shakespeare-fast run (the recipe's 4-layer, 128-wide GPT, 64
characters of context): seconds to the first character and to all 200, medians of several
runs, each side a fresh process, with the load average beside each figure.

    python bench/sample_speed.py [--repeats 5] [--tokens 200] [--sides "round 1,after"]
                                 [--data ../shared/data/tinyshakespeare.txt]

The run is launched here first on the local cloud, a few steps (what it says does not change
the speed), as `verse`. Sides, run in turn each repeat:
  start     the issue's start: the CLI's imports, the trainer's INIT with an optimizer (which
            imports torch's compiler), the whole checkpoint read, no key/value cache, the
            text printed when all of it is sampled
  round 1   `spotrun sample verse` as the first round left it: the name found through the
            run's full status (which imports the launch machinery), torch's own threads
  folder    `spotrun sample RUN_FOLDER` today
  after     `spotrun sample verse` today: a plain form, so no typer (spotrun/cli/
            sample_quick.py), the name from the ledger's light read, a small model sampled
            on one thread
Goal (issue 34 point 8): first character under 2 s, 200 characters under 3 s.

Measured 2026-12-06 on 2 logical CPUs (Intel Xeon, AVX-512 BF16 and AMX), 5 repeats,
`--sides "round 1,folder,after"`, other developers' test suites running beside it, twice:
                  load average 2.5-3.6           load average 6.1-9.3
              first character  all tokens   first character  all tokens
   round 1           1.94 s      2.54 s            3.22 s     21.66 s
    folder           1.80 s      2.56 s            3.09 s      4.35 s
     after           1.73 s      2.52 s            3.19 s      4.55 s
The same text on every side. On a busy machine two torch threads spin against the other
processes (round 1's 200 characters: 15 to 68 s); one thread does not. With
`python -X importtime`, ~1.0 s of the first character (quiet machine) is importing torch,
which no side avoids.
"""

from __future__ import annotations

import argparse
import json
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

# `spotrun sample NAME` as round 1 left it: the same typer path, with what it did differently
# put back (the module that its run_status came from, torch's own thread count).
ROUND_1 = """
import sys
import torch
from spotrun.cli.common import leave
from spotrun.cli.main import _run
import spotrun.service.runs  # round 1's run_status: imported to find a run by name
import spotrun.train.sample as sample
sample.sampling_threads = lambda model: torch.get_num_threads()
leave(_run(["sample", *sys.argv[1:]]))
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Seconds to the first character of stdout and to the process's end, and the text."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
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


def launch_run(env: dict[str, str], data: Path) -> Path:
    """`verse`, a few steps of shakespeare-fast launched on the local cloud; its folder."""
    sets = [f"data={data}", "epochs=1", "text.steps_per_epoch=5", "text.eval_tokens=1024"]
    args = [arg for item in sets for arg in ("--set", item)]
    command = [sys.executable, "-m", "spotrun", "launch", "shakespeare-fast", "--name", "verse"]
    subprocess.run(command + args, check=True, capture_output=True, env=env)
    listing = subprocess.run(
        [sys.executable, "-m", "spotrun", "ls", "--all", "--json"],
        check=True,
        capture_output=True,
        env=env,
    )
    (run,) = json.loads(listing.stdout)
    return Path(env["SPOTRUN_HOME"]) / "runs" / str(run["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--sides", default="start,round 1,folder,after", help="comma-separated, of the above"
    )
    args = parser.parse_args()
    with_malloc_settings()
    print(hardware_line(), flush=True)
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory(dir="/tmp") as tmux:
        env = {**os.environ, "SPOTRUN_HOME": home, "TMUX_TMPDIR": tmux}
        env.pop("TMUX", None)
        run_dir = launch_run(env, args.data)
        n = str(args.tokens)
        spotrun = [sys.executable, "-m", "spotrun"]
        sides = {
            "start": [sys.executable, "-c", BEFORE, str(run_dir), n],
            "round 1": [sys.executable, "-c", ROUND_1, "verse", "--tokens", n],
            "folder": [*spotrun, "sample", str(run_dir), "--tokens", n],
            "after": [*spotrun, "sample", "verse", "--tokens", n],
        }
        sides = {side: sides[side] for side in args.sides.split(",")}
        times: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        texts: dict[str, str] = {}
        loads: list[float] = []
        for repeat in range(args.repeats):
            for side, command in sides.items():
                first_s, total_s, text = timed(command, env)
                times[side].append((first_s, total_s))
                texts[side] = text
                loads.append(os.getloadavg()[0])
                print(
                    f"repeat {repeat + 1} {side:>8}: first character {first_s:5.2f} s, "
                    f"{args.tokens} tokens {total_s:5.2f} s (load average {loads[-1]:.1f})",
                    flush=True,
                )
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
    same = len(set(texts.values())) == 1
    print(
        f"\nmedians of {args.repeats} ({args.tokens} tokens, seed 0, temperature 0.8; "
        f"load average {min(loads):.1f} to {max(loads):.1f}):"
    )
    print(f"{'':>10} {'first character':>16} {'all tokens':>11}")
    for side, pairs in times.items():
        first = statistics.median(p[0] for p in pairs)
        total = statistics.median(p[1] for p in pairs)
        print(f"{side:>10} {first:14.2f} s {total:9.2f} s")
    print(f"the same text on every side: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
