"""cifar10-fast at 1/4 width: seconds per training step with mixed_precision=auto against fp32
and bf16 forced, on the device this runs on (whose CPU line is printed beside every figure).

Each variant is cifar10-fast as shipped (every method on, batch 128), changed only in
precision and memory format, trained by the real Trainer on synthetic 32 px images (the step
time does not depend on the pixels). One process, one torch thread, the variants interleaved:
every round runs `--steps` steps of each in turn, so they share the machine's load alike; the
figure is the median step over all rounds, after one warm-up round.

    python bench/precision_auto.py                  # 5 rounds of 2 steps
    python bench/precision_auto.py --rounds 3 --steps 1

Time to 80% would take hours in emulated bf16 here; `auto` trains exactly the fp32 variant on a
CPU without bf16 (the table says which it chose), so its time to accuracy is fp32's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _env import GLIBC_TUNABLES, hardware_line, with_malloc_settings

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from spotrun.recipes import get_recipe  # noqa: E402
from spotrun.train.build import make_optimizer, seed_everything  # noqa: E402
from spotrun.train.callbacks import Callback  # noqa: E402
from spotrun.train.data.memory import TensorBatches  # noqa: E402
from spotrun.train.device import detect_capabilities  # noqa: E402
from spotrun.train.events import Event  # noqa: E402
from spotrun.train.methods import build_methods  # noqa: E402
from spotrun.train.methods.auto import resolve_methods  # noqa: E402
from spotrun.train.models import build_model  # noqa: E402
from spotrun.train.state import State  # noqa: E402
from spotrun.train.trainer import Trainer  # noqa: E402

QUARTER_WIDTH = 'model_options={"widths": [16, 64, 64]}'
VARIANTS: dict[str, list[str]] = {
    "auto (as shipped)": [],
    "fp32 forced": ['methods.mixed_precision={"precision": "fp32"}'],
    "fp32 + channels_last": [
        'methods.mixed_precision={"precision": "fp32"}',
        'methods.channels_last={"when": "always"}',
    ],
    "bf16 forced (+ channels_last)": [
        'methods.mixed_precision={"precision": "bf16"}',
        'methods.channels_last={"when": "always"}',
    ],
}


class StepTimer(Callback):
    """Seconds of each training step, from batch start to batch end."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._start = 0.0

    def on_event(self, event: Event, state: State) -> None:
        if event is Event.BATCH_START:
            self._start = time.perf_counter()
        elif event is Event.BATCH_END:
            self.seconds.append(time.perf_counter() - self._start)


def build(overrides: list[str], steps: int, batch: int) -> tuple[Trainer, StepTimer, str]:
    recipe = get_recipe("cifar10-fast", [QUARTER_WIDTH, "data=digits", *overrides], data_here=False)
    seed_everything(0)
    gen = torch.Generator().manual_seed(0)
    n = steps * batch
    images = torch.randn(n, 3, 32, 32, generator=gen)
    labels = torch.randint(0, 10, (n,), generator=gen)
    train = TensorBatches(images, labels, batch, shuffle=True, seed=0)
    resolved = resolve_methods(recipe.methods, detect_capabilities("cpu"))
    chosen = ", ".join(f"{c.method}={c.use}" for c in resolved.choices[:2])
    model = build_model(recipe.model, recipe.num_classes, **recipe.model_options)
    timer = StepTimer()
    trainer = Trainer(
        model=model,
        optimizer=make_optimizer(model, recipe),
        train_data=train,
        eval_data=None,
        max_epochs=1,
        algorithms=build_methods(resolved.methods),
        callbacks=[timer],
    )
    return trainer, timer, chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2, help="steps of each variant per round")
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()
    with_malloc_settings()
    torch.set_num_threads(1)
    print(f"device: {hardware_line()}")
    print(f"torch {torch.__version__}, 1 thread, GLIBC_TUNABLES={GLIBC_TUNABLES}")
    built = {name: build(o, args.steps, args.batch) for name, o in VARIANTS.items()}
    for round_ in range(args.rounds + 1):  # round 0 warms up
        for trainer, timer, _ in built.values():
            if round_ == 1:
                timer.seconds.clear()
            trainer.state.max_epochs += 0 if round_ == 0 else 1
            trainer.fit()
        print(f"round {round_}/{args.rounds} done", flush=True)
    fp32 = statistics.median(built["fp32 forced"][1].seconds)
    print(f"\ncifar10-fast, 1/4 width, batch {args.batch}; device: {hardware_line()}")
    print("| variant | chosen | median s/step | range | vs fp32 |")
    print("|---|---|--:|--:|--:|")
    for name, (_, timer, chosen) in built.items():
        med = statistics.median(timer.seconds)
        lo, hi = min(timer.seconds), max(timer.seconds)
        print(f"| {name} | {chosen} | {med:.3f} | {lo:.3f}-{hi:.3f} | {med / fp32:.2f}x |")


if __name__ == "__main__":
    main()
