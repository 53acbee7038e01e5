"""Resume cost for a ~100 MB model: how long from SIGTERM to a written checkpoint and an exited
process, and from a restart to the first training step.

    python bench/resume_cost.py [--repeats 3] [--threads 2]

The model is a 25M-parameter MLP on 3x32x32 inputs (100.7 MB of float32 weights; with SGD
momentum the checkpoint holds about 201 MB). Each repeat: start the trainer, let it take a few
steps, SIGTERM it, time the checkpoint and the exit; then start it again on the same run
directory and time its first step. The child process is this file with --child; it reports
wall-clock times on stdout. GLIBC_TUNABLES is set for parent and children alike.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._env import with_malloc_settings  # noqa: E402

with_malloc_settings()


def child(run_dir: Path, threads: int) -> None:
    """The trainer side: report times as `<label> <unix time>` lines."""
    started = time.time()
    import torch
    from torch import nn

    from spotrun.train.build import exit_checkpointed
    from spotrun.train.callbacks import Callback
    from spotrun.train.data.memory import TensorBatches
    from spotrun.train.events import Event
    from spotrun.train.state import State
    from spotrun.train.trainer import Trainer

    imported = time.time()
    torch.set_num_threads(threads)

    class Report(Callback):
        def __init__(self) -> None:
            self.first = True

        def on_event(self, event: Event, state: State) -> None:
            if event is Event.FIT_START:
                print(f"fit_start {time.time()} step {state.step}", flush=True)
            elif event is Event.BATCH_END:
                if self.first:
                    print(f"first_step {time.time()}", flush=True)
                    self.first = False
                print(f"step {time.time()} {state.step}", flush=True)
            elif event is Event.INTERRUPT:
                print(f"interrupt {time.time()} step {state.step}", flush=True)

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Flatten(),
        nn.Linear(3 * 32 * 32, 4096),
        nn.ReLU(),
        nn.Linear(4096, 2048),
        nn.ReLU(),
        nn.Linear(2048, 2048),
        nn.ReLU(),
        nn.Linear(2048, 10),
    )
    gen = torch.Generator().manual_seed(0)
    data = TensorBatches(
        torch.randn(256, 3, 32, 32, generator=gen),
        torch.randint(0, 10, (256,), generator=gen),
        32,
        shuffle=True,
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    trainer = Trainer(
        model=model,
        optimizer=optimizer,
        train_data=data,
        eval_data=None,
        max_epochs=10_000,
        callbacks=[Report()],
        checkpoint_dir=run_dir / "checkpoints",
    )
    built = time.time()
    print(f"started {started} imported {imported} built {built}", flush=True)
    result = trainer.fit()
    print(f"saved {time.time()} step {result.step}", flush=True)
    if result.interrupted:
        exit_checkpointed()  # as `spotrun train` does


def start(run_dir: Path, threads: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--child", str(run_dir), "--threads", str(threads)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def read_until(proc: subprocess.Popen[str], label: str, lines: list[str]) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(label):
            return line
    raise RuntimeError(f"child exited before '{label}':\n{''.join(lines)}")


def one_round(run_dir: Path, threads: int, warm_steps: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    # Restart (or first start) to first step.
    launched = time.time()
    proc = start(run_dir, threads)
    lines: list[str] = []
    header = read_until(proc, "started", lines).split()
    first = float(read_until(proc, "first_step", lines).split()[1])
    fit_start = float(next(x for x in lines if x.startswith("fit_start")).split()[1])
    figures["restart_to_first_step_s"] = first - launched
    figures["python_and_imports_s"] = float(header[3]) - launched
    figures["build_s"] = float(header[5]) - float(header[3])
    figures["load_checkpoint_s"] = fit_start - float(header[5])
    figures["first_step_s"] = first - fit_start
    while True:
        line = read_until(proc, "step ", lines)
        if int(line.split()[2]) >= figures.get("resumed_step", 0) + warm_steps:
            break
    # SIGTERM to checkpoint written and process gone.
    signalled = time.time()
    proc.send_signal(signal.SIGTERM)
    saved = float(read_until(proc, "saved", lines).split()[1])
    code = proc.wait()
    exited = time.time()
    assert code == 75, f"exit code {code}"
    figures["sigterm_to_checkpoint_s"] = saved - signalled
    figures["sigterm_to_exit_s"] = exited - signalled
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", type=Path)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.threads)
        return
    rounds = []
    with tempfile.TemporaryDirectory(dir=REPO / "bench") as tmp:
        run_dir = Path(tmp)
        for i in range(args.repeats + 1):  # round 0 starts fresh; the others resume
            figures = one_round(run_dir, args.threads, warm_steps=3)
            size = max(p.stat().st_size for p in (run_dir / "checkpoints").glob("ckpt-*.pt"))
            kind = "fresh start" if i == 0 else "resume"
            print(
                f"round {i} ({kind}): "
                + "  ".join(f"{k} {v:.2f}" for k, v in figures.items())
                + f"  checkpoint {size / 1e6:.0f} MB",
                flush=True,
            )
            if i > 0:
                rounds.append(figures)
    print("medians over resumes:")
    for key in rounds[0]:
        print(f"  {key}: {statistics.median(r[key] for r in rounds):.2f}")


if __name__ == "__main__":
    main()
