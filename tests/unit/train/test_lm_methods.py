"""The language-model methods: the maths of each pure function, and for each method a tiny GPT
that trains with it on and, stopped by SIGTERM mid-run and resumed, ends bitwise identical to a
run never stopped (weights, optimizer, metrics: the data order included)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from spotrun.recipes import get_recipe
from spotrun.train import functional as sf
from spotrun.train.build import build_trainer
from spotrun.train.methods.catalog import LANGUAGE_METHODS
from spotrun.train.models.gpt import GPT
from spotrun.train.trainer import Trainer
from spotrun.train.wrapping import unwrap_model
from tests.unit.train.tiny import StopAt

# ------------------------------------------------------------------ maths


def test_rotary_keeps_norms_and_depends_on_relative_position_only() -> None:
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 10, 8, generator=gen), torch.randn(1, 1, 10, 8, generator=gen)
    cos, sin = sf.rotary_tables(10, 8)
    rq, rk = sf.apply_rotary(q, cos, sin), sf.apply_rotary(k, cos, sin)
    assert torch.allclose(rq.norm(dim=-1), q.norm(dim=-1), atol=1e-5)
    assert torch.equal(rq[..., 0, :], q[..., 0, :])  # position 0 is not turned
    # The same q at position 5 against the same k at 2, and at 7 against 4: equal scores.
    same_q, same_k = q[..., :1, :].expand(1, 1, 10, 8), k[..., :1, :].expand(1, 1, 10, 8)
    rq, rk = sf.apply_rotary(same_q, cos, sin), sf.apply_rotary(same_k, cos, sin)
    score = lambda i, j: float((rq[0, 0, i] * rk[0, 0, j]).sum())  # noqa: E731
    assert score(5, 2) == pytest.approx(score(7, 4), rel=1e-5)
    assert score(5, 2) != pytest.approx(score(5, 4), rel=1e-3)
    with pytest.raises(ValueError, match="even"):
        sf.rotary_tables(4, 7)


def test_alibi_slopes_and_bias() -> None:
    assert torch.allclose(sf.alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    assert len(sf.alibi_slopes(6)) == 6  # not a power of two: interleaved extra slopes
    bias = sf.alibi_bias(2, 4)
    assert bias.shape == (2, 4, 4)
    assert bias[0, 3, 1] == -2 * 2.0**-4 and bias[1, 3, 0] == -3 * 2.0**-8
    assert torch.isinf(bias[:, 0, 1]).all() and (bias.diagonal(dim1=1, dim2=2) == 0).all()


def test_rms_norm_and_qk_normalize() -> None:
    x = torch.randn(3, 5, 16)
    w = torch.rand(16)
    expected = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-6) * w
    assert torch.allclose(sf.rms_norm(x, w), expected, atol=1e-6)
    q, k = sf.qk_normalize(x * 100, x * 0.1)
    for t in (q, k):
        assert torch.allclose(t.pow(2).mean(-1), torch.ones(3, 5), atol=1e-3)


def test_swiglu_is_the_gated_product() -> None:
    x, wg, wu, wd = torch.randn(4, 6), torch.randn(10, 6), torch.randn(10, 6), torch.randn(6, 10)
    gate = x @ wg.T
    expected = (gate * torch.sigmoid(gate) * (x @ wu.T)) @ wd.T
    assert torch.allclose(sf.swiglu(x, wg, wu, wd), expected, atol=1e-5)


@pytest.mark.parametrize("with_bias", [False, True])
def test_fused_attention_matches_the_explicit_one(with_bias: bool) -> None:
    q, k, v = (torch.randn(2, 2, 9, 4) for _ in range(3))
    bias = sf.alibi_bias(2, 9) if with_bias else None
    fused = sf.causal_attention(q, k, v, bias=bias, fused=True)
    assert torch.allclose(fused, sf.causal_attention(q, k, v, bias=bias, fused=False), atol=1e-5)
    # Causal: the first position attends to itself only.
    assert torch.allclose(fused[:, :, 0], v[:, :, 0], atol=1e-6)


def test_tie_weights_shares_the_embedding() -> None:
    model = GPT(11, block_size=8, n_layer=1, n_head=1, n_embd=8)
    old = model.lm_head.weight
    removed, added = sf.tie_weights(model)
    assert model.lm_head.weight is model.wte.weight and removed == [old] and added == []


def test_sequence_length_warmup_schedule_and_truncation() -> None:
    lengths = [
        sf.warmup_seq_len(p / 10, 64, min_len=8, duration_frac=0.5, multiple=8) for p in range(11)
    ]
    assert lengths[0] == 8 and lengths[5:] == [64] * 6
    assert lengths == sorted(lengths) and all(n % 8 == 0 for n in lengths)
    x = torch.arange(12).view(2, 6)
    y = (x + 1).reshape(-1)
    tx, ty = sf.truncate_sequences(x, y, 4)
    assert torch.equal(tx, x[:, :4]) and torch.equal(ty, (x[:, :4] + 1).reshape(-1))


# ------------------------------------------------------- trains and resumes

TINY_GPT = '{"block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 16}'
CASES: dict[str, dict[str, dict[str, Any]]] = {
    "rotary": {"rotary": {}},
    "alibi": {"alibi": {}},
    "rms_norm": {"rms_norm": {}},
    "swiglu": {"swiglu": {}},
    "qk_norm": {"qk_norm": {}},
    "weight_tying": {"weight_tying": {}},
    "fused_attention": {"fused_attention": {}},
    "seq_len_warmup": {"seq_len_warmup": {"min_len": 4, "duration_frac": 0.6, "multiple": 4}},
    "low_precision_norm": {"low_precision_norm": {}, "mixed_precision": {"precision": "bf16"}},
}


def test_every_language_method_has_a_case() -> None:
    assert set(CASES) == LANGUAGE_METHODS


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("text") / "verse.txt"
    path.write_text("the quick brown fox jumps over the lazy dog.\n" * 60)
    return path


def _recipe(corpus: Path, methods: dict[str, dict[str, Any]]) -> Any:
    sets = [
        f"data={corpus}",
        f"model_options={TINY_GPT}",
        "num_classes=32",
        "epochs=2",
        "batch_size=8",
        "lr=0.01",
        "text.block_size=16",
        "text.steps_per_epoch=4",
        "text.eval_tokens=512",
        "methods={}",
        *(f"methods.{name}={json.dumps(options)}" for name, options in methods.items()),
    ]
    return get_recipe("shakespeare-baseline", sets)


def _final(trainer: Trainer) -> dict[str, Any]:
    return {
        "model": unwrap_model(trainer.state.model).state_dict(),
        "optimizer": trainer.state.optimizer.state_dict()["state"],
        "position": trainer.state.position(),
        "metrics": trainer.state.metrics | {"elapsed_s": 0},
    }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@pytest.mark.parametrize("case", list(CASES))
def test_trains_and_resumes_bitwise(case: str, corpus: Path, tmp_path: Path) -> None:
    recipe = _recipe(corpus, CASES[case])
    straight = build_trainer(recipe, tmp_path / "straight")
    straight.fit()
    ran = {row["algorithm"] for row in straight.engine.summary()}
    assert set(CASES[case]) <= ran
    metrics = straight.state.metrics
    # It learns: 8 steps take the loss well below a uniform guess over the vocabulary.
    assert metrics["test_loss"] < 0.8 * math.log(32), metrics
    assert metrics["test_perplexity"] == pytest.approx(math.exp(metrics["test_loss"]))
    assert metrics["test_loss_per_char"] == pytest.approx(metrics["test_loss"])  # char tokens

    build_trainer(recipe, tmp_path / "stopped", extra_callbacks=[StopAt(3)]).fit()
    resumed = build_trainer(recipe, tmp_path / "stopped")
    resumed.fit()
    assert resumed.resumed_from is not None and resumed.resumed_from.name == "ckpt-000000003.pt"
    assert _same(_final(resumed), _final(straight)), case
