"""Muon: the Newton-Schulz maths, the orthogonalised step, the usual split of parameters, and
`optimizer=muon` in a recipe training a tiny GPT with shakespeare-fast's methods, stopped by
SIGTERM and resumed bitwise."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from spotrun.core.errors import SpotrunError
from spotrun.core.rundir import METRICS_FILE
from spotrun.recipes import get_recipe
from spotrun.recipes.describe import describe_recipe
from spotrun.train.build import build_trainer, make_optimizer
from spotrun.train.models.gpt import GPT
from spotrun.train.models.small import SmallResNet
from spotrun.train.optim.muon import Muon, newton_schulz, split_for_muon
from spotrun.train.wrapping import unwrap_model
from tests.unit.train.tiny import StopAt, tiny_shakespeare_fast

# The quintic's known band around 1 for a well-conditioned input (the write-up's ~0.7-1.2).
BAND = (0.6, 1.25)


def _in_band(matrix: torch.Tensor) -> bool:
    values = torch.linalg.svdvals(matrix)
    return bool(values.min() > BAND[0] and values.max() < BAND[1])


@pytest.mark.parametrize("shape", [(32, 128), (128, 32)])
def test_newton_schulz_gives_singular_values_near_one(shape: tuple[int, int]) -> None:
    gen = torch.Generator().manual_seed(0)
    matrix = torch.randn(*shape, generator=gen) * 50
    result = newton_schulz(matrix)
    assert result.shape == matrix.shape and _in_band(result)
    # The same singular vectors: close to U V^T, the exact orthogonalisation.
    u, _, vt = torch.linalg.svd(matrix, full_matrices=False)
    cosine = (result * (u @ vt)).sum() / (result.norm() * (u @ vt).norm())
    assert cosine > 0.95


def test_a_matrix_steps_by_an_orthogonalised_update_and_a_bias_by_adamw() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(96, 24)  # weight 24 x 96: wide, scale 1
    optimizer = Muon(
        [{"params": [layer.bias], "muon": False}, {"params": [layer.weight], "muon": True}],
        lr=0.01,
    )
    weight, bias = layer.weight.detach().clone(), layer.bias.detach().clone()
    layer(torch.randn(64, 96)).pow(2).sum().backward()
    optimizer.step()
    step = (weight - layer.weight.detach()) / 0.01
    assert _in_band(step)  # the raw gradient's singular values spread far wider
    assert not _in_band(layer.weight.grad)  # type: ignore[arg-type]
    # AdamW's first step moves every coordinate by lr against its gradient's sign.
    moved = bias - layer.bias.detach()
    assert torch.allclose(moved, 0.01 * layer.bias.grad.sign(), atol=1e-6)  # type: ignore[union-attr]
    assert set(optimizer.state[layer.weight]) == {"momentum_buffer"}


def test_adamw_takes_exactly_the_embeddings_head_and_one_dimensional_parameters() -> None:
    model = GPT(65, block_size=16, n_layer=2, n_head=2, n_embd=32)
    split = split_for_muon(model)
    names = {id(p): n for n, p in model.named_parameters()}
    others = {names[id(p)] for p in split.others}
    matrices = {names[id(p)] for p in split.matrices}
    assert others == {n for n, p in model.named_parameters() if p.ndim == 1} | {
        "wte.weight",
        "wpe.weight",
        "lm_head.weight",
    }
    assert matrices == {
        f"blocks.{i}.{m}.weight"
        for i in (0, 1)
        for m in ("attn.qkv", "attn.proj", "mlp.fc", "mlp.proj")
    }
    tied = GPT(65, block_size=16, n_layer=1, n_head=2, n_embd=32, tie_weights=True)
    tied_split = split_for_muon(tied)
    assert id(tied.wte.weight) in {id(p) for p in tied_split.others}
    assert len(tied_split.others) + len(tied_split.matrices) == len(list(tied.parameters()))
    # Conv filters are Muon's (flattened), the classifier's head AdamW's.
    net = SmallResNet(num_classes=4, width=8)
    conv_split = split_for_muon(net)
    assert {p.ndim for p in conv_split.matrices} == {4}
    assert {id(p) for p in conv_split.others} == {
        id(p) for p in net.parameters() if p.ndim == 1
    } | {id(net.head.weight)}


def test_recipe_optimizer_muon_builds_it_and_bad_values_are_refused(tmp_path: Path) -> None:
    recipe = get_recipe("shakespeare-fast", ["optimizer=muon", "muon_lr=0.03"], data_here=False)
    optimizer = make_optimizer(GPT(65, block_size=16, n_layer=1, n_head=2, n_embd=16), recipe)
    assert isinstance(optimizer, Muon)
    assert [(g["muon"], g["lr"]) for g in optimizer.param_groups] == [
        (False, recipe.lr),
        (True, 0.03),
    ]
    with pytest.raises(SpotrunError, match="muon_momentum"):
        get_recipe("shakespeare-fast", ["muon_momentum=1.5"], data_here=False)


TINY_GPT = '{"block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 16}'


def test_shakespeare_fast_with_muon_learns_and_resumes_bitwise(tmp_path: Path) -> None:
    recipe = tiny_shakespeare_fast(tmp_path, "optimizer=muon", f"model_options={TINY_GPT}")
    straight = build_trainer(recipe, tmp_path / "straight")
    straight.fit()
    rows = [json.loads(line) for line in (tmp_path / "straight" / METRICS_FILE).open()]
    losses = [row["test_loss"] for row in rows if "test_loss" in row]
    assert len(losses) == 2 and losses[1] < losses[0] < math.log(32), losses
    # After the methods' model surgery each parameter is still in its half.
    model = unwrap_model(straight.state.model)
    groups = straight.state.optimizer.param_groups
    expected = split_for_muon(model)
    # (no_decay_norm_bias may split each half in two: a half is all groups of its kind)
    halves = {
        kind: {id(p) for g in groups if g["muon"] is kind for p in g["params"]}
        for kind in (False, True)
    }
    assert halves[False] == {id(p) for p in expected.others}
    assert halves[True] == {id(p) for p in expected.matrices}

    build_trainer(recipe, tmp_path / "stopped", extra_callbacks=[StopAt(3)]).fit()
    resumed = build_trainer(recipe, tmp_path / "stopped")
    resumed.fit()
    assert resumed.resumed_from is not None
    a, b = model.state_dict(), unwrap_model(resumed.state.model).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    state_a = straight.state.optimizer.state_dict()["state"]
    state_b = resumed.state.optimizer.state_dict()["state"]
    assert state_a.keys() == state_b.keys()
    assert all(torch.equal(state_a[i][k], state_b[i][k]) for i in state_a for k in state_a[i])
    assert resumed.state.metrics | {"elapsed_s": 0} == straight.state.metrics | {"elapsed_s": 0}


def test_recipes_show_says_both_halves_and_their_learning_rates() -> None:
    recipe = get_recipe("shakespeare-fast", ["optimizer=muon"], data_here=False)
    text = "\n".join(describe_recipe(recipe))
    assert "muon lr 0.02 (momentum 0.95 nesterov) on hidden matrices, adamw lr 0.003" in text
