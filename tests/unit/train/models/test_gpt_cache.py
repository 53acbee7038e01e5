"""Generating with cached keys and values gives exactly the tokens generating without them
gives, for every position scheme and attention path, greedy and sampled, past block_size too."""

from __future__ import annotations

import pytest
import torch

from spotrun.train.models.gpt import GPT

TINY = {"block_size": 32, "n_layer": 2, "n_head": 2, "n_embd": 16}


def _generate(model: GPT, *, cache: bool, temperature: float, top_k: int | None) -> list[int]:
    prompt = torch.tensor([[1, 2, 3]])
    out = model.generate(
        prompt,
        40,  # past block_size 32: the window slides
        temperature=temperature,
        top_k=top_k,
        vocab=10,
        generator=torch.Generator().manual_seed(7),
        cache=cache,
    )
    return [int(token) for token in out[0]]


@pytest.mark.parametrize("position", ["learned", "rotary", "alibi", "none"])
@pytest.mark.parametrize("attention", ["explicit", "fused"])
@pytest.mark.parametrize(("temperature", "top_k"), [(0.0, None), (1.0, None), (0.8, 5)])
def test_cached_generation_gives_the_uncached_tokens(
    position: str, attention: str, temperature: float, top_k: int | None
) -> None:
    torch.manual_seed(0)
    model = GPT(11, **TINY, position=position, attention=attention, qk_norm=True).eval()  # type: ignore[arg-type]
    # Weights scaled up so the next-token distributions are far from uniform (a trained
    # model's): a cache that attended to the wrong keys would change the tokens.
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(3.0)
    uncached = _generate(model, cache=False, temperature=temperature, top_k=top_k)
    assert _generate(model, cache=True, temperature=temperature, top_k=top_k) == uncached


def test_cached_logits_match_the_full_forward_position_by_position() -> None:
    torch.manual_seed(0)
    model = GPT(11, **TINY, position="rotary", norm="rms", qk_norm=True).eval()
    idx = torch.randint(11, (2, 12), generator=torch.Generator().manual_seed(0))  # 2 sequences
    full = model.logits(idx)
    caches = model.new_caches()
    with torch.no_grad():
        steps = [model.logits_cached(idx[:, :5], caches)]
        steps += [model.logits_cached(idx[:, i : i + 1], caches) for i in range(5, 12)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)
