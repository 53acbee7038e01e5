"""FSDP (torch's fully_shard) on 2 real gloo processes: the same training as one process
accumulating, and checkpoints that move between 2 processes and 1 in both directions.

One run of 2 spawned processes serves every test (process start-up is most of the cost): it
trains a tiny block model from scratch under FSDP, and resumes under FSDP a run that one
process checkpointed after its first epoch. One process trains the reference (batch 16 as
2 x 8 accumulated) and resumes the FSDP run's first-epoch checkpoint.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import shutil
import socket
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor

from spotrun.core.errors import UsageError
from spotrun.recipes import get_recipe
from spotrun.recipes.base import Recipe
from spotrun.train.build import build_trainer_on_device
from spotrun.train.checkpoint import Checkpointer
from spotrun.train.data.memory import TensorBatches
from spotrun.train.distributed import LaunchEnv
from spotrun.train.fsdp import FullyShard, choose_fsdp, decide_fsdp, fsdp_of
from spotrun.train.trainer import Trainer

GLOBAL_BATCH, DEVICE_BATCH, TRAIN, EVAL = 16, 8, 96, 17  # 6 steps an epoch; 17: ranks 2 and 1
EPOCHS, WORLD = 2, 2


class Blocks(nn.Module):
    """Two blocks in a ModuleList (each its own FSDP unit) between a stem and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(10, 16)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 16), nn.GELU()) for _ in range(2)
        )
        self.head = nn.Linear(16, 3)  # 3 rows: shards of unequal size on 2 processes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = x + block(x)
        logits: torch.Tensor = self.head(x)
        return logits


def make_trainer(run_dir: Path, rank: int = 0, world: int = 1) -> Trainer:
    gen = torch.Generator().manual_seed(0)
    x, y = (
        torch.randn(TRAIN + EVAL, 10, generator=gen),
        torch.randint(0, 3, (TRAIN + EVAL,), generator=gen),
    )
    train = TensorBatches(
        x[:TRAIN], y[:TRAIN], GLOBAL_BATCH, shuffle=True, device_batch=DEVICE_BATCH,
        rank=rank, world_size=world,
    )  # fmt: skip
    test = TensorBatches(x[TRAIN:], y[TRAIN:], 8, shuffle=False, rank=rank, world_size=world)
    torch.manual_seed(0)  # every rank builds the same model: FSDP does not broadcast it
    model = Blocks()
    return Trainer(
        model=model,
        optimizer=torch.optim.AdamW(model.parameters(), lr=1e-2),
        train_data=train,
        eval_data=test,
        max_epochs=EPOCHS,
        algorithms=[FullyShard()],
        checkpoint_dir=run_dir / "checkpoints",
        config={"recipe": "blocks"},
    )


def tiny_gpt(text: Path) -> Recipe:
    """A character GPT of two blocks, no dropout, `fsdp=on`: the recipe setting's path."""
    return get_recipe(
        "shakespeare-baseline",
        [
            f"data={text}",
            'model_options={"block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32, '
            '"dropout": 0.0}',
            "text.block_size=16", "text.steps_per_epoch=4", "text.eval_tokens=1024",
            "batch_size=8", "device_batch=4", "eval_batch_size=8", "epochs=1", "threads=1",
            "optimizer=adamw", "methods={}", "fsdp=on",
        ],
    )  # fmt: skip


def _fit_and_report(run_dir: Path, rank: int, gpt: Recipe | None = None) -> None:
    if gpt is None:
        trainer = make_trainer(run_dir, rank, WORLD)
    else:
        trainer, _ = build_trainer_on_device(gpt, run_dir, LaunchEnv(rank, WORLD, rank))
    root = fsdp_of(trainer.state.model)
    assert root is not None, "the model was not sharded"
    params = list(trainer.state.model.parameters())
    assert all(isinstance(p, DTensor) for p in params)
    local = sum(p.to_local().numel() for p in params if isinstance(p, DTensor))
    trainer.fit()
    (run_dir / f"rank{rank}.json").write_text(
        json.dumps({"local_numel": local, "metrics": trainer.state.metrics})
    )


def _worker(rank: int, port: int, scratch: Path, moved_up: Path, gpt: Path) -> None:
    torch.set_num_threads(1)
    # A collective one rank never joins fails after the timeout instead of hanging the suite.
    address = f"tcp://127.0.0.1:{port}"
    timeout = timedelta(seconds=120)
    dist.init_process_group(
        "gloo", init_method=address, rank=rank, world_size=WORLD, timeout=timeout
    )
    try:
        _fit_and_report(scratch, rank)
        _fit_and_report(moved_up, rank)  # a 1-process checkpoint goes on under FSDP
        _fit_and_report(gpt, rank, tiny_gpt(gpt.parent / "text.txt"))
    finally:
        dist.destroy_process_group()


@dataclass
class Runs:
    one: Path  # 1 process, each step 2 micro-batches of 8
    fsdp: Path  # 2 processes under FSDP, 8 each
    up: Path  # 1 process for an epoch, then 2 under FSDP
    down: Path  # 2 under FSDP for an epoch, then 1
    down_metrics: dict[str, float]
    gpt_one: Path  # the tiny GPT recipe with fsdp=on on 1 process: nothing to shard
    gpt_fsdp: Path  # the same on 2, sharded


def final_weights(run: Path) -> dict[str, Any]:
    loaded = Checkpointer(run / "checkpoints").load_latest()
    assert loaded is not None
    return dict(loaded.payload["model"])


def first_epoch_checkpoint(source: Path, target: Path) -> None:
    (target / "checkpoints").mkdir(parents=True)
    shutil.copy(source / "checkpoints" / "ckpt-000000006.pt", target / "checkpoints")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    base = tmp_path_factory.mktemp("fsdp")
    one, fsdp, up, down = (base / name for name in ("one", "fsdp", "up", "down"))
    gpt_one, gpt_fsdp = base / "gpt_one", base / "gpt_fsdp"
    words = random.Random(0)
    text = " ".join("".join(words.choice("etaoinshrd") for _ in range(5)) for _ in range(3000))
    (base / "text.txt").write_text(text)
    torch.set_num_threads(1)
    make_trainer(one).fit()
    build_trainer_on_device(tiny_gpt(base / "text.txt"), gpt_one)[0].fit()
    first_epoch_checkpoint(one, up)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spawn = multiprocessing.get_context("spawn")
    workers = [
        spawn.Process(target=_worker, args=(r, port, fsdp, up, gpt_fsdp)) for r in range(WORLD)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=600)  # a bound, not a figure: the gloo timeout ends a stuck rank
    assert [w.exitcode for w in workers] == [0] * WORLD, "a rank failed: see its traceback above"
    first_epoch_checkpoint(fsdp, down)
    moved = make_trainer(down)
    moved.fit()
    assert moved.resumed_from is not None
    return Runs(one, fsdp, up, down, moved.state.metrics, gpt_one, gpt_fsdp)


def assert_close_weights(got: dict[str, Any], expected: dict[str, Any]) -> None:
    assert got.keys() == expected.keys()
    for name, value in got.items():
        torch.testing.assert_close(value, expected[name], rtol=1e-5, atol=1e-6)


def rank_report(run: Path, rank: int) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run / f"rank{rank}.json").read_text())
    return loaded


def test_two_sharded_processes_train_what_one_accumulating_process_trains(runs: Runs) -> None:
    whole = sum(v.numel() for v in final_weights(runs.one).values())
    shards = [rank_report(runs.fsdp, r)["local_numel"] for r in range(WORLD)]
    assert sum(shards) == whole and max(shards) < whole  # each rank held a part only
    # The checkpoint is consolidated: whole tensors, the format of a run without FSDP.
    assert_close_weights(final_weights(runs.fsdp), final_weights(runs.one))


def test_fsdp_checkpoint_of_two_processes_resumes_on_one_identically(runs: Runs) -> None:
    unmoved = rank_report(runs.fsdp, 0)["metrics"]
    assert runs.down_metrics.keys() == unmoved.keys()
    for key in ("train_loss", "test_loss", "test_acc", "lr"):
        assert runs.down_metrics[key] == pytest.approx(unmoved[key], rel=1e-6, abs=1e-9), key
    assert_close_weights(final_weights(runs.down), final_weights(runs.fsdp))


def test_one_process_checkpoint_resumes_on_two_sharded_processes(runs: Runs) -> None:
    assert_close_weights(final_weights(runs.up), final_weights(runs.one))
    expected = rank_report(runs.fsdp, 0)["metrics"]
    got = rank_report(runs.up, 0)["metrics"]
    assert got["test_loss"] == pytest.approx(expected["test_loss"], rel=1e-6)


@pytest.mark.parametrize(
    ("setting", "state_gib", "world", "on"),
    [
        ("off", 100, 8, False),
        ("on", 1, 8, True),
        ("on", 100, 1, False),  # one process: nothing to shard over
        ("auto", 1, 8, False),  # fits: DDP is faster
        ("auto", 30, 8, True),  # over half of a 40 GiB device
    ],
)
def test_fsdp_switches_on_by_setting_size_and_process_count(
    setting: Any, state_gib: int, world: int, on: bool
) -> None:
    choice = decide_fsdp(setting, state_gib << 30, 40 << 30, world)
    assert choice.on is on, choice.reason


def test_recipe_setting_fsdp_on_shards_a_gpt_and_trains_what_one_process_trains(
    runs: Runs,
) -> None:
    assert rank_report(runs.gpt_fsdp, 0)["local_numel"] < sum(
        v.numel() for v in final_weights(runs.gpt_one).values()
    )
    assert_close_weights(final_weights(runs.gpt_fsdp), final_weights(runs.gpt_one))


def test_methods_that_keep_a_whole_copy_of_the_weights_are_refused_where_fsdp_shards() -> None:
    model = Blocks()
    optimizer = torch.optim.AdamW(model.parameters())
    cpu = torch.device("cpu")
    with pytest.raises(UsageError, match="ema keeps a whole copy of the weights"):
        choose_fsdp("on", model, optimizer, cpu, world_size=2, processes_here=2, methods={"ema"})
    alone = choose_fsdp(
        "on", model, optimizer, cpu, world_size=1, processes_here=1, methods={"ema"}
    )
    assert not alone.on  # one process shards nothing, so EMA is fine there
