"""The GPT model: shapes, causality under every position scheme and attention path, the fused
and explicit attention agreeing, and each option's setter giving the constructor's model."""

from __future__ import annotations

import pytest
import torch

from spotrun.train.models import build_model
from spotrun.train.models.gpt import GPT, RMSNorm, SwiGluMlp, set_norm, set_position

TINY = {"block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 16}


def _tokens(b: int = 2, t: int = 12, vocab: int = 11) -> torch.Tensor:
    return torch.randint(vocab, (b, t), generator=torch.Generator().manual_seed(0))


def test_logits_are_flat_next_token_scores() -> None:
    model = build_model("gpt", 11, **TINY)
    idx = _tokens()
    assert model(idx).shape == (2 * 12, 11)
    assert isinstance(model, GPT) and model.logits(idx).shape == (2, 12, 11)


@pytest.mark.parametrize("position", ["learned", "rotary", "alibi", "none"])
@pytest.mark.parametrize("attention", ["explicit", "fused"])
def test_no_position_sees_the_future(position: str, attention: str) -> None:
    torch.manual_seed(0)
    model = GPT(11, **TINY, position=position, attention=attention, qk_norm=True).eval()  # type: ignore[arg-type]
    idx = _tokens()
    changed = idx.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 11
    a, b = model.logits(idx), model.logits(changed)
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-6)
    assert not torch.allclose(a[:, 7:], b[:, 7:])


@pytest.mark.parametrize("position", ["learned", "alibi"])
def test_fused_and_explicit_attention_agree(position: str) -> None:
    torch.manual_seed(0)
    model = GPT(11, **TINY, position=position).eval()  # type: ignore[arg-type]
    idx = _tokens()
    explicit = model.logits(idx)
    for block in model.blocks:
        block.attn.fused = True
    assert torch.allclose(model.logits(idx), explicit, atol=1e-5)


def test_options_build_the_parts_the_methods_switch() -> None:
    model = GPT(11, **TINY, position="rotary", norm="rms", mlp="swiglu", tie_weights=True)
    assert model.wpe is None and model.position == "rotary"
    assert isinstance(model.norm_f, RMSNorm) and isinstance(model.blocks[0].mlp, SwiGluMlp)
    assert model.lm_head.weight is model.wte.weight
    count = sum(p.numel() for p in GPT(11, **TINY, tie_weights=True).parameters())
    assert count == sum(p.numel() for p in GPT(11, **TINY).parameters()) - 11 * 16


def test_setters_report_the_parameters_they_swap() -> None:
    model = GPT(11, **TINY)
    wpe = model.wpe
    assert wpe is not None
    removed, added = set_position(model, "rotary")
    assert removed == [wpe.weight] and added == []
    removed, added = set_norm(model, "rms")
    assert len(removed) == 2 * (2 * 2 + 1) and len(added) == 2 * 2 + 1  # LN weight+bias each
    assert set_norm(model, "rms") == ([], [])  # already RMSNorm: nothing to do


def test_learned_positions_refuse_longer_sequences() -> None:
    model = GPT(11, **TINY)
    with pytest.raises(ValueError, match="longer than block_size"):
        model(_tokens(t=17))


def test_generate_extends_the_prompt() -> None:
    model = GPT(11, **TINY).eval()
    out = model.generate(_tokens(1, 3), 20, top_k=5, generator=torch.Generator().manual_seed(1))
    assert out.shape == (1, 23) and int(out.max()) < 11
