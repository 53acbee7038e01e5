"""gpt2-small-fast with FSDP off and on: the part of gpu_benchmark.py for spotrun.train.fsdp.

1. What `fsdp=auto` decides on this device for GPT-2 small (124M) and a GPT-2 XL-sized model
   (1.5B, built on the meta device: no memory), from the training state's size.
2. On every GPU of the machine (2 or more; one process each, NCCL): tokens per second over
   all GPUs and peak memory per GPU, with fsdp=off (DDP) and fsdp=on, on random GPT-2 ids,
   each GPU computing the recipe's device batch per step. One GPU cannot shard: the figures
   are then printed as "unmeasured" and only part 1 runs.

With --dry-run (CPU) part 2 runs on 2 gloo processes at tiny sizes: the code paths, not
the figures.
"""

from __future__ import annotations

import multiprocessing
import socket
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from bench.gpu_gpt2 import DRY, LossClock, peak_gib
from spotrun.recipes import Recipe, get_recipe
from spotrun.train.build import build_trainer, make_optimizer
from spotrun.train.data.text import TextWindows
from spotrun.train.distributed import LaunchEnv
from spotrun.train.fsdp import decide_fsdp, device_memory_bytes, training_state_bytes
from spotrun.train.models import build_model

RECIPE = "gpt2-small-fast"
SETTINGS = ("off", "on")
GPT2_XL = {"n_layer": 48, "n_head": 25, "n_embd": 1600}  # 1.5B parameters


@dataclass
class RankRate:
    tokens_per_s: float
    peak_gib: float


def auto_decisions(device: torch.device, gpus: int) -> None:
    """What fsdp=auto picks here for GPT-2 small and GPT-2 XL sizes (on `gpus` processes)."""
    memory = device_memory_bytes(device, 1)
    for label, extra in (("124M", {}), ("1.5B (GPT-2 XL shape)", GPT2_XL)):
        recipe = get_recipe(RECIPE, data_here=False)
        options = {**recipe.model_options, **extra}
        with torch.device("meta"):  # shapes only: a 1.5B model costs no memory here
            model = build_model(recipe.model, recipe.num_classes, **options)
            optimizer = make_optimizer(model, recipe)
        choice = decide_fsdp("auto", training_state_bytes(model, optimizer), memory, gpus)
        print(f"  {RECIPE} at {label} on {gpus} GPU(s): {choice.reason}")


def _rank_rate(rank: int, world: int, recipe: Recipe, steps: int, warmup: int) -> RankRate:
    device = torch.device("cuda", rank) if torch.cuda.is_available() else torch.device("cpu")
    assert recipe.text is not None
    ids = torch.randint(0, 50_257, (1 << 20,), generator=torch.Generator().manual_seed(0))
    per_gpu = recipe.device_batch or recipe.batch_size
    train = TextWindows(
        ids, block_size=recipe.text.block_size, batch_size=per_gpu * world,
        steps=warmup + steps, rank=rank, world_size=world,
    )  # fmt: skip
    clock = LossClock(device, target=float("-inf"), warmup=warmup)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with tempfile.TemporaryDirectory() as tmp:
        launch = LaunchEnv(rank, world, rank)
        trainer = build_trainer(recipe, Path(tmp), launch, extra_callbacks=[clock])
        trainer.checkpointer = None  # checkpoints and evaluation are not what is timed
        trainer.eval_data = None
        trainer.train_data = train
        trainer.fit()
    return RankRate(clock.timed_tokens / clock.seconds, peak_gib(device))


def _worker(
    rank: int, world: int, port: int, sets: list[str], steps: int, warmup: int, out: Any
) -> None:
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(rank)
    else:
        torch.set_num_threads(1)
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(minutes=10),
    )
    try:
        for fsdp in SETTINGS:  # both in one process group: starting processes is slow
            sized = [f"text.steps_per_epoch={warmup + steps}", "epochs=1", f"fsdp={fsdp}"]
            recipe = get_recipe(RECIPE, [*sets, *sized])
            # Sequence-length warmup shortens the windows on purpose: not a throughput figure.
            methods = {k: v for k, v in recipe.methods.items() if k != "seq_len_warmup"}
            recipe = recipe.model_copy(update={"methods": methods})
            out.put((fsdp, _rank_rate(rank, world, recipe, steps, warmup)))
    finally:
        dist.destroy_process_group()


def sharded_rates(world: int, sets: list[str], steps: int, warmup: int) -> dict[str, RankRate]:
    """Per fsdp setting: tokens/s summed over `world` processes and the largest peak memory
    of one of them."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    args = (world, port, sets, steps, warmup, out)
    workers = [spawn.Process(target=_worker, args=(rank, *args)) for rank in range(world)]
    for worker in workers:
        worker.start()
    rates: dict[str, list[RankRate]] = {fsdp: [] for fsdp in SETTINGS}
    for _ in range(world * len(SETTINGS)):
        fsdp, rate = out.get(timeout=1800)  # a bound for a stuck process, not a figure
        rates[fsdp].append(rate)
    for worker in workers:
        worker.join()
    if any(w.exitcode for w in workers):
        raise SystemExit("an FSDP benchmark process failed: see its traceback above")
    return {
        fsdp: RankRate(sum(r.tokens_per_s for r in got), max(r.peak_gib for r in got))
        for fsdp, got in rates.items()
    }


def fsdp_part(device: torch.device, *, dry_run: bool, steps: int, warmup: int, text: Path) -> None:
    gpus = 2 if dry_run else torch.cuda.device_count()
    print(f"\n== FSDP: {RECIPE} with fsdp=off (DDP) and fsdp=on over {gpus} processes")
    auto_decisions(device, max(gpus, 2))
    if gpus < 2:
        print(
            "| fsdp | GPUs | tokens/s (all GPUs) | peak GiB per GPU |\n|---|--:|--:|--:|\n"
            "| off | 1 | unmeasured | unmeasured |\n| on | 1 | unmeasured | unmeasured |\n"
            "FSDP shards over 2 or more GPUs; this machine has one: unmeasured"
        )
        return
    # Dry run: one window per process and step; the real run keeps the recipe's device batch.
    sets = [*DRY, "device_batch=1", f"data={text}", "threads=1"] if dry_run else [f"data={text}"]
    print("| fsdp | GPUs | tokens/s (all GPUs) | peak GiB per GPU |\n|---|--:|--:|--:|")
    for fsdp, rate in sharded_rates(gpus, sets, steps, warmup).items():
        print(f"| {fsdp} | {gpus} | {rate.tokens_per_s:,.0f} | {rate.peak_gib:.2f} |", flush=True)
