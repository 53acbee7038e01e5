"""The GPT model's speedrun options (spotrun.train.models.gpt_speedrun): each one's maths, and
the shakespeare recipes built from them training and resuming bitwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from spotrun.core.errors import SpotrunError
from spotrun.core.rundir import METRICS_FILE
from spotrun.recipes import get_recipe
from spotrun.train.build import build_trainer, make_optimizer
from spotrun.train.models.gpt import GPT, GeluMlp
from spotrun.train.models.gpt_speedrun import ReluSquaredMlp, soft_cap
from spotrun.train.wrapping import unwrap_model
from tests.unit.train.tiny import StopAt, tiny_shakespeare_fast

SMALL = {"block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 16}


def test_soft_cap_bounds_logits_and_leaves_small_ones_nearly_alone() -> None:
    raw = torch.tensor([-1e4, -100.0, -1.0, 0.0, 0.5, 100.0, 1e4])
    capped = soft_cap(raw, 15.0)
    assert bool((capped.abs() <= 15.0).all())
    assert torch.allclose(capped[2:5], raw[2:5], atol=2e-3)  # x - x^3/(3 cap^2)
    torch.manual_seed(0)
    model = GPT(32, **SMALL, logit_softcap=15.0)  # type: ignore[arg-type]
    with torch.no_grad():
        model.lm_head.weight.mul_(1e4)  # logits in the thousands without the cap
    logits = model.logits(torch.randint(0, 32, (2, 16)))
    assert float(logits.abs().max()) <= 15.0 and float(logits.abs().max()) > 14.0


def test_relu_squared_mlp_is_its_formula_with_the_gelu_mlps_parameter_count() -> None:
    torch.manual_seed(0)
    model = GPT(32, **SMALL, mlp="relu2")  # type: ignore[arg-type]
    mlp = model.layers()[0].mlp
    assert isinstance(mlp, ReluSquaredMlp)
    x = torch.randn(2, 5, 16)
    assert torch.allclose(mlp(x), mlp.proj(F.relu(mlp.fc(x)) ** 2))
    assert bool((mlp.fc(x) < 0).any())  # negative pre-activations give 0, not a small value
    plain = GPT(32, **SMALL)  # type: ignore[arg-type]
    assert isinstance(plain.layers()[0].mlp, GeluMlp)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in plain.parameters())


def test_zero_initialised_projections_make_every_block_the_identity_at_init() -> None:
    torch.manual_seed(0)
    model = GPT(32, **SMALL, zero_init_proj=True)  # type: ignore[arg-type]
    x = torch.randn(2, 16, 16)
    for block in model.layers():
        assert torch.equal(block(x), x)
    # The logits are then the head read off the embeddings alone, and gradients still reach
    # the projections, so they grow from zero.
    idx = torch.randint(0, 32, (2, 16))
    assert model.wpe is not None
    embedded = model.wte(idx) + model.wpe(torch.arange(16))
    assert torch.allclose(model.logits(idx), model.lm_head(model.norm_f(embedded)))
    proj = model.layers()[0].mlp.proj
    assert isinstance(proj, nn.Linear)
    (grad,) = torch.autograd.grad(F.cross_entropy(model(idx), idx.flatten()), [proj.weight])
    assert float(grad.abs().sum()) > 0


def test_untied_head_gets_its_own_rate_and_adamw_the_recipes_betas() -> None:
    recipe = get_recipe(
        "shakespeare-baseline",
        ["model_options.tie_weights=false", "model_options.head_lr_scale=0.25"],
        data_here=False,
    )
    model = GPT(65, **recipe.model_options)
    optimizer = make_optimizer(model, recipe)
    rest, head = optimizer.param_groups
    assert head["params"] == [model.lm_head.weight] and head["lr"] == pytest.approx(0.25e-3)
    assert rest["lr"] == pytest.approx(1e-3) and head["betas"] == (0.9, 0.99)
    assert all(p is not model.lm_head.weight for p in rest["params"])
    # A tied head is the embedding: it cannot have a rate of its own.
    with pytest.raises(ValueError, match="tie_weights=False"):
        GPT(65, **{**recipe.model_options, "tie_weights": True})
    with pytest.raises(SpotrunError, match="betas"):
        get_recipe("shakespeare-baseline", ["betas=[0.9, 1.5]"], data_here=False)


def test_shakespeare_fast_trains_and_resumes_bitwise_with_its_options(tmp_path: Path) -> None:
    tiny = [f"model_options.{key}={value}" for key, value in SMALL.items()]
    recipe = tiny_shakespeare_fast(tmp_path, *tiny)
    straight = build_trainer(recipe, tmp_path / "straight")
    straight.fit()
    rows = [json.loads(line) for line in (tmp_path / "straight" / METRICS_FILE).open()]
    losses = [row["test_loss"] for row in rows if "test_loss" in row]
    assert len(losses) == 2 and losses[1] < losses[0], losses

    build_trainer(recipe, tmp_path / "stopped", extra_callbacks=[StopAt(3)]).fit()
    resumed = build_trainer(recipe, tmp_path / "stopped")
    resumed.fit()
    assert resumed.resumed_from is not None
    a = unwrap_model(straight.state.model).state_dict()
    b = unwrap_model(resumed.state.model).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [g["lr"] for g in resumed.state.optimizer.param_groups] == [
        g["lr"] for g in straight.state.optimizer.param_groups
    ]
    assert resumed.state.metrics | {"elapsed_s": 0} == straight.state.metrics | {"elapsed_s": 0}
