"""The global batch as a recipe's contract: plans, the order batches are dealt in, and the
trainer's gradient accumulation, in one process (the torchrun tests are in
tests/e2e/test_train_distributed.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.recipes import get_recipe
from spotrun.recipes.batching import global_batch_line
from spotrun.train.batch_plan import plan_batches, split_micro_batches
from spotrun.train.data.memory import TensorBatches
from spotrun.train.data.text import TextWindows
from spotrun.train.trainer import Trainer


def test_plans_keep_the_global_batch_and_cut_shares_into_equal_micro_batches() -> None:
    eight = plan_batches(1024, 8, device_batch=128)
    four = plan_batches(1024, 4, device_batch=128)
    assert (eight.micro_batch, eight.accumulation) == (128, 1)
    assert (four.micro_batch, four.accumulation) == (128, 2)
    assert four.describe("images", "GPU") == "1,024 images per step = 4 GPUs x 128 x 2 accumulated"
    # 96 per process with at most 40 at once: 3 x 32, never uneven micro-batches
    assert plan_batches(96, 1, device_batch=40).accumulation == 3
    assert plan_batches(64, 2).accumulation == 1  # no device_batch: the whole share at once
    with pytest.raises(UsageError, match="does not split evenly over 3 processes"):
        plan_batches(64, 3)


def test_dry_run_line_says_how_the_gpus_make_the_global_batch() -> None:
    recipe = get_recipe("resnet50-fast", data_here=False)
    assert global_batch_line(recipe) == "global batch: 1,024 images per step = 8 GPUs x 128"
    assert global_batch_line(recipe, gpus=2) == (
        "global batch: 1,024 images per step = 2 GPUs x 128 x 4 accumulated"
    )
    digits = get_recipe("digits-fast", data_here=False)
    assert global_batch_line(digits) == "global batch: 64 images per step = 1 process x 64"
    with pytest.raises(UsageError, match="1,024 .* does not split evenly over 3 processes"):
        global_batch_line(recipe, gpus=3)


def _steps(source: TensorBatches | TextWindows, epoch: int) -> list[list[float]]:
    return [x.tolist() for x, _ in source.batches(epoch)]


def test_every_world_size_deals_the_same_steps_in_the_same_order() -> None:
    """Rank by rank, then micro-batch by micro-batch, the pieces put together are the one
    process's batches: world size changes neither the batches nor their order."""
    inputs, targets = torch.arange(100).float(), torch.arange(100)
    whole = TensorBatches(inputs, targets, 8, shuffle=True, seed=3)
    assert len(whole) == 12  # 100 // 8: a partial last step would weigh its samples unlike
    for world in (2, 4):
        ranks = [
            TensorBatches(inputs, targets, 8, shuffle=True, seed=3, rank=r, world_size=world)
            for r in range(world)
        ]
        assert all(len(r) == len(whole) and r.plan.share == 8 // world for r in ranks)
        for epoch in (0, 1):
            dealt = zip(*(_steps(r, epoch) for r in ranks), strict=True)
            assert [sum(parts, []) for parts in dealt] == _steps(whole, epoch)
    tokens = torch.arange(500) % 37
    one = TextWindows(tokens, block_size=6, batch_size=4, steps=3, seed=1)
    two = [
        TextWindows(tokens, block_size=6, batch_size=4, steps=3, seed=1, rank=r, world_size=2)
        for r in (0, 1)
    ]
    pairs = zip(_steps(two[0], 2), _steps(two[1], 2), strict=True)
    assert [a + b for a, b in pairs] == _steps(one, 2)


def test_micro_batches_carry_their_own_targets_also_for_language_models() -> None:
    inputs = torch.arange(12).view(4, 3)
    flat_targets = torch.arange(12) + 100  # (B*T,), as a language model's next tokens
    parts = split_micro_batches(inputs, flat_targets, 2)
    assert [x.tolist() for x, _ in parts] == [[[0, 1, 2], [3, 4, 5]], [[6, 7, 8], [9, 10, 11]]]
    assert [y.tolist() for _, y in parts] == [list(range(100, 106)), list(range(106, 112))]


def _trained(device_batch: int | None) -> dict[str, torch.Tensor]:
    """Six steps of a model without BatchNorm on 16-sample global batches."""
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(96, 10, generator=gen), torch.randint(0, 3, (96,), generator=gen)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 3))
    data = TensorBatches(x, y, 16, shuffle=True, seed=0, device_batch=device_batch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    Trainer(model=model, optimizer=optimizer, train_data=data, eval_data=None, max_epochs=1).fit()
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_accumulated_micro_batches_train_what_the_whole_batch_trains() -> None:
    whole, accumulated, halves = _trained(None), _trained(4), _trained(8)
    for name, value in whole.items():
        # 4 x 4 against 1 x 16: the same gradient up to float summation order
        torch.testing.assert_close(accumulated[name], value, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(halves[name], value, rtol=1e-5, atol=1e-6)
