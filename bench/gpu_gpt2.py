"""gpt2-small-baseline against gpt2-small-fast on one GPU: the part of gpu_benchmark.py for them.

1. Tokens per second and peak GPU memory of training, at the recipes' full size (124M
   parameters, 12 windows of 1,024 tokens per step) with every method of theirs on except
   sequence-length warmup (which shortens the windows on purpose), on random GPT-2 token ids.
2. Time to a fixed training loss: each recipe as shipped (its schedule squeezed into
   --loss-steps steps, sequence-length warmup included) on a real text tokenised with GPT-2's
   BPE (tiny Shakespeare: 338k tokens, so a 124M model sees it many times over; training loss,
   averaged over each 10 steps, is the figure, since its validation split is too small to
   mean much). The time is synchronised wall-clock from the first step; compiling counts.

With --dry-run (CPU) both parts run at tiny sizes: the code paths, not the figures.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from spotrun.recipes import Recipe, get_recipe
from spotrun.train.build import build_trainer
from spotrun.train.callbacks import Callback
from spotrun.train.data.text import TextWindows
from spotrun.train.events import Event
from spotrun.train.state import State

PAIR = ("gpt2-small-baseline", "gpt2-small-fast")
CHECK_EVERY = 10  # steps per averaged loss (one host sync each)
DRY = [
    "model_options.n_layer=1",
    "model_options.n_head=2",
    "model_options.n_embd=32",
    "model_options.block_size=32",
    "text.block_size=32",
    "text.eval_tokens=256",
    "batch_size=2",
    "eval_batch_size=2",
    "resources.gpus=0",
]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_gib(device: torch.device) -> float:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0


class LossClock(Callback):
    """Tokens trained, synchronised seconds from the first step, and when the loss averaged
    over each CHECK_EVERY steps first fell to `target` (the step and the seconds)."""

    def __init__(self, device: torch.device, target: float, warmup: int = 0) -> None:
        self.device, self.target, self.warmup = device, target, warmup
        self.losses: list[torch.Tensor] = []
        self.started = 0.0
        self.seconds = 0.0
        self.timed_tokens = 0
        self.reached: tuple[int, float] | None = None
        self.last_mean = float("nan")

    def on_event(self, event: Event, state: State) -> None:
        if event is Event.FIT_START:
            sync(self.device)
            self.started = time.perf_counter()
        if event is not Event.BATCH_END or state.loss is None or state.inputs is None:
            return
        if state.step == self.warmup and self.warmup:  # throughput: from the end of warm-up
            sync(self.device)
            self.started = time.perf_counter()
        elif state.step > self.warmup:
            self.timed_tokens += state.inputs.numel()
        self.losses.append(state.loss.detach().float())
        if state.step % CHECK_EVERY == 0 or state.step == state.total_steps:
            self.last_mean = float(torch.stack(self.losses).mean())  # the one sync
            self.losses.clear()
            elapsed = time.perf_counter() - self.started
            if self.reached is None and self.last_mean <= self.target:
                self.reached = (state.step, elapsed)
        if state.step == state.total_steps:
            sync(self.device)
            self.seconds = time.perf_counter() - self.started


@dataclass
class Outcome:
    name: str
    tokens_per_s: float
    peak_gib: float
    reached: tuple[int, float] | None = None
    final_loss: float = float("nan")
    total_s: float = 0.0


def _fit(recipe: Recipe, clock: LossClock, train: TextWindows | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(recipe, Path(tmp), extra_callbacks=[clock])
        trainer.checkpointer = None  # checkpoints are not what is timed
        trainer.eval_data = None  # nor evaluation
        if train is not None:
            trainer.train_data = train
        trainer.fit()


def throughput(
    name: str, sets: list[str], steps: int, warmup: int, device: torch.device
) -> Outcome:
    # `sets` name a real text (the trainer loads it); the batches are then random ids.
    recipe = get_recipe(name, [*sets, f"text.steps_per_epoch={warmup + steps}", "epochs=1"])
    methods = {k: v for k, v in recipe.methods.items() if k != "seq_len_warmup"}
    recipe = recipe.model_copy(update={"methods": methods})
    assert recipe.text is not None
    random_ids = torch.randint(0, 50_257, (1 << 20,), generator=torch.Generator().manual_seed(0))
    train = TextWindows(
        random_ids,
        block_size=recipe.text.block_size,
        batch_size=recipe.device_batch or recipe.batch_size,  # one GPU's part of a step
        steps=warmup + steps,
    )
    clock = LossClock(device, target=float("-inf"), warmup=warmup)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    _fit(recipe, clock, train)
    return Outcome(name, clock.timed_tokens / clock.seconds, peak_gib(device))


def time_to_loss(
    name: str, sets: list[str], steps: int, target: float, device: torch.device
) -> Outcome:
    recipe = get_recipe(name, [*sets, f"text.steps_per_epoch={steps}", "epochs=1"])
    clock = LossClock(device, target)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    _fit(recipe, clock)
    out = Outcome(name, 0.0, peak_gib(device), clock.reached, clock.last_mean, clock.seconds)
    return out


def gpt2_part(
    device: torch.device,
    *,
    dry_run: bool,
    steps: int,
    warmup: int,
    text: Path,
    target_loss: float,
    loss_steps: int,
) -> None:
    sets = [*DRY] if dry_run else []
    print(
        f"\n== gpt2-small pair on one {device}: tokens/s on random GPT-2 ids ({warmup} warm-up "
        f"steps, then {steps} timed), then time to a training loss of {target_loss} on "
        f"{text.name} (GPT-2 tokens, {loss_steps} steps)"
    )
    data = [*sets, f"data={text}", "threads=1"] if dry_run else [f"data={text}"]
    rates = [throughput(name, data, steps, warmup, device) for name in PAIR]
    print("\n| recipe | tokens/s per GPU | peak GPU memory (GiB) |")
    print("|---|--:|--:|")
    for r in rates:
        print(f"| {r.name} | {r.tokens_per_s:,.0f} | {r.peak_gib:.1f} |", flush=True)
    losses = [time_to_loss(name, data, loss_steps, target_loss, device) for name in PAIR]
    print(
        f"\n| recipe | s to train loss {target_loss} (step) | final loss | s for {loss_steps} steps | peak GiB |"
    )
    print("|---|--:|--:|--:|--:|")
    for o in losses:
        when = f"{o.reached[1]:.1f} ({o.reached[0]})" if o.reached else "not reached"
        print(f"| {o.name} | {when} | {o.final_loss:.3f} | {o.total_s:.1f} | {o.peak_gib:.1f} |")
    base, fast = losses
    if base.reached and fast.reached:
        print(
            f"gpt2-small-fast reaches {target_loss} {base.reached[1] / fast.reached[1]:.2f}x sooner"
        )
    print(
        f"tokens/s: gpt2-small-fast {rates[1].tokens_per_s / rates[0].tokens_per_s:.2f}x the baseline's"
    )
