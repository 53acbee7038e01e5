"""Trainer overhead: steps/s of spotrun's Trainer (no methods) against a hand-written PyTorch
loop, on the same model and data, interleaved in one process.

    python bench/trainer_overhead.py [--repeats 11] [--steps 30] [--threads 1]

Each repeat times one epoch of `--steps` steps through each side, alternating which goes
first; both sides start from the same weights. Prints per-repeat figures, the medians and
their ratio (the target is >= 0.97). GLIBC_TUNABLES is set for the whole process.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._env import with_malloc_settings  # noqa: E402

with_malloc_settings()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from spotrun.train.data.memory import TensorBatches  # noqa: E402
from spotrun.train.models.small import SmallResNet  # noqa: E402
from spotrun.train.trainer import Trainer  # noqa: E402


def make_data(steps: int, batch: int) -> TensorBatches:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(steps * batch, 3, 32, 32, generator=gen)
    y = torch.randint(0, 10, (steps * batch,), generator=gen)
    return TensorBatches(x, y, batch, shuffle=True, seed=0)


def optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(
        model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4
    )


def time_trainer(model: torch.nn.Module, data: TensorBatches) -> float:
    trainer = Trainer(
        model=model, optimizer=optimizer(model), train_data=data, eval_data=None, max_epochs=1
    )
    started = time.perf_counter()
    trainer.fit()
    return len(data) / (time.perf_counter() - started)


def time_hand_loop(model: torch.nn.Module, data: TensorBatches) -> float:
    opt = optimizer(model)
    started = time.perf_counter()
    model.train()
    loss_sum = torch.zeros((), dtype=torch.float64)  # what any loop keeps for its log line
    for inputs, targets in data.batches(0):
        loss = F.cross_entropy(model(inputs), targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_sum += loss.detach()
    float(loss_sum)
    return len(data) / (time.perf_counter() - started)


def compare(initial: torch.nn.Module, data: TensorBatches, repeats: int) -> tuple[float, float]:
    """Median steps/s of (trainer, hand-written loop), interleaved, alternating which goes first."""
    for timer in (time_hand_loop, time_trainer):  # warm-up: allocator, kernels, imports
        timer(copy.deepcopy(initial), data)
    trainer_rates: list[float] = []
    loop_rates: list[float] = []
    for repeat in range(repeats):
        sides = [(trainer_rates, time_trainer), (loop_rates, time_hand_loop)]
        if repeat % 2:
            sides.reverse()
        for rates, timer in sides:
            rates.append(timer(copy.deepcopy(initial), data))
        print(
            f"  repeat {repeat}: trainer {trainer_rates[-1]:.2f} steps/s  "
            f"loop {loop_rates[-1]:.2f} steps/s"
        )
    return statistics.median(trainer_rates), statistics.median(loop_rates)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = SmallResNet(10, width=args.width)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"SmallResNet width {args.width} ({params / 1e3:.0f}k params), 3x32x32, batch "
        f"{args.batch}, {args.steps} steps per timing, {args.threads} thread(s)"
    )
    t, h = compare(model, make_data(args.steps, args.batch), args.repeats)
    print(f"median: trainer {t:.2f} steps/s, hand-written loop {h:.2f} steps/s, ratio {t / h:.3f}")

    # The fixed cost per step: a model so small that the loop's bookkeeping is most of a step.
    tiny = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))
    steps = args.steps * 20
    print(f"fixed cost per step: a linear model, batch 8, {steps} steps per timing")
    t, h = compare(tiny, make_data(steps, 8), args.repeats)
    extra_us = (1 / t - 1 / h) * 1e6
    print(
        f"median: trainer {t:.0f} steps/s, loop {h:.0f} steps/s, ratio {t / h:.3f}; "
        f"the trainer adds {extra_us:.0f} us per step"
    )


if __name__ == "__main__":
    main()
