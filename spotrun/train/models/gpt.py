"""A decoder-only transformer (GPT-2's shape), plain enough to read in one sitting.

Token ids (B, T) go in; next-token logits come out flattened to (B*T, vocab), matching the
data's flattened targets (B*T,), so the trainer's classification loss, loss sums and accuracy
are next-token cross-entropy (nats per token) and next-token accuracy with no trainer change.

The speedrun options (ReLU-squared MLP, logit soft-capping, zero-initialised projections, an
untied head with its own learning rate) live in spotrun.train.models.gpt_speedrun.

Every option the language-model methods switch is a setter here (`set_position`, `set_norm`,
`set_mlp`, `set_qk_norm`, `set_weight_tying`, `set_attention`), used both by the constructor
and by the methods' model surgery at INIT, so a model built with an option and a model changed
by its method are the same model. Each setter returns the parameters it removed and added, for
the optimizer (spotrun.train.methods.surgery.swap_parameters).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from spotrun.train.models.gpt_speedrun import ReluSquaredMlp, soft_cap, zero_projections
from spotrun.train.models.kv_cache import LayerCache
from spotrun.train.models.transformer_ops import (
    alibi_bias,
    apply_rotary,
    attention_to_past,
    causal_attention,
    rms_norm,
    rotary_tables,
    swiglu,
)

Position = Literal["learned", "rotary", "alibi", "none"]
Norm = Literal["layer", "rms"]
Mlp = Literal["gelu", "swiglu", "relu2"]
Attention = Literal["explicit", "fused"]
Swap = tuple[list[torch.Tensor], list[torch.Tensor]]  # (removed, added) parameters

INIT_STD = 0.02  # GPT-2's initialisation of every weight matrix and embedding


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class GeluMlp(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, 4 * dim)
        self.proj = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


class SwiGluMlp(nn.Module):
    """Three matrices of hidden width ~8/3 dim: as many parameters as the 4x GELU MLP."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        hidden = 32 * math.ceil(8 * dim / 3 / 32)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return swiglu(x, self.gate.weight, self.up.weight, self.proj.weight)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, n_head: int) -> None:
        super().__init__()
        if dim % n_head:
            raise ValueError(f"n_embd {dim} is not a multiple of n_head {n_head}")
        self.n_head = n_head
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.position: Position = "learned"  # only rotary and alibi act in here
        self.rotary_base = 10_000.0
        self.fused = False
        self.q_norm: RMSNorm | None = None
        self.k_norm: RMSNorm | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self._heads(x)
        bias = None
        if self.position == "rotary":
            cos, sin = rotary_tables(t, q.shape[-1], self.rotary_base, x.device)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        elif self.position == "alibi":
            bias = alibi_bias(self.n_head, t, x.device)
        y = causal_attention(q, k, v, bias=bias, fused=self.fused)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values (B, H, T, D) of x (B, T, C), QK-normalised if on."""
        b, t, c = x.shape
        q, k, v = (
            part.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
            for part in self.qkv(x).split(c, dim=2)
        )
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        return q, k, v

    def forward_cached(self, x: torch.Tensor, cache: LayerCache) -> torch.Tensor:
        """forward for the positions after those in `cache`, whose keys and values it adds.
        An empty cache (the prompt) takes forward's own maths, so its outputs are forward's."""
        b, t, c = x.shape
        start = cache.length
        q, k, v = self._heads(x)
        bias = None
        if self.position == "rotary":
            cos, sin = rotary_tables(start + t, q.shape[-1], self.rotary_base, x.device)
            cos, sin = cos[start:], sin[start:]
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        elif self.position == "alibi":
            bias = alibi_bias(self.n_head, start + t, x.device)[:, start:, :]
        k, v = cache.extend(k, v)
        if start == 0:
            y = causal_attention(q, k, v, bias=bias, fused=self.fused)
        else:
            y = attention_to_past(q, k, v, bias=bias, fused=self.fused)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, dim: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.norm_1: nn.Module = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, n_head)
        self.norm_2: nn.Module = nn.LayerNorm(dim)
        self.mlp: nn.Module = GeluMlp(dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.norm_1(x)))
        return x + self.drop(self.mlp(self.norm_2(x)))

    def forward_cached(self, x: torch.Tensor, cache: LayerCache) -> torch.Tensor:
        x = x + self.drop(self.attn.forward_cached(self.norm_1(x), cache))
        return x + self.drop(self.mlp(self.norm_2(x)))


class GPT(nn.Module):
    def __init__(
        self,
        num_classes: int,  # the vocabulary size (the trainer's name for the output width)
        *,
        block_size: int = 256,  # longest context in tokens (learned positions need it)
        n_layer: int = 4,
        n_head: int = 4,
        n_embd: int = 128,
        dropout: float = 0.0,
        position: Position = "learned",
        norm: Norm = "layer",
        mlp: Mlp = "gelu",
        qk_norm: bool = False,
        tie_weights: bool = False,
        attention: Attention = "explicit",
        logit_softcap: float | None = None,  # tanh cap on the output logits (speedruns: 30, 15)
        zero_init_proj: bool = False,  # blocks start as the identity
        head_lr_scale: float = 1.0,  # the untied output layer's lr, times the recipe's
    ) -> None:
        super().__init__()
        if logit_softcap is not None and logit_softcap <= 0:
            raise ValueError(f"logit_softcap must be positive, got {logit_softcap}")
        if head_lr_scale <= 0:
            raise ValueError(f"head_lr_scale must be positive, got {head_lr_scale}")
        if tie_weights and head_lr_scale != 1.0:
            raise ValueError("head_lr_scale needs an untied output layer: tie_weights=False")
        self.logit_softcap = logit_softcap
        self.head_lr_scale = head_lr_scale
        self.vocab_size = num_classes
        self.block_size = block_size
        self.n_layer = n_layer
        self.wte = nn.Embedding(num_classes, n_embd)
        self.wpe: nn.Embedding | None = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, dropout) for _ in range(n_layer))
        self.norm_f: nn.Module = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, num_classes, bias=False)
        self.apply(_init_weights)
        scale_residual_projections(self)
        set_position(self, position)
        set_norm(self, norm)
        set_mlp(self, mlp)
        set_qk_norm(self, qk_norm)
        set_weight_tying(self, tie_weights)
        set_attention(self, attention)
        if zero_init_proj:
            zero_projections(self.layers())

    @property
    def position(self) -> Position:
        return self.layers()[0].attn.position if self.wpe is None else "learned"

    def layers(self) -> list[Block]:
        return [block for block in self.blocks if isinstance(block, Block)]

    def logits(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, T) token ids -> (B, T, vocab) next-token logits."""
        t = idx.shape[1]
        if t > self.block_size and self.wpe is not None:
            raise ValueError(f"sequence of {t} tokens is longer than block_size {self.block_size}")
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(t, device=idx.device))
        x = self.drop(x)
        for block in self.layers():
            x = block(x)
        return self._head(x)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.logits(idx).flatten(0, 1)

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.lm_head(self.norm_f(x))
        return out if self.logit_softcap is None else soft_cap(out, self.logit_softcap)

    def new_caches(self) -> list[LayerCache]:
        """Empty key and value caches, one per layer, for logits_cached."""
        return [LayerCache() for _ in self.layers()]

    def logits_cached(self, idx: torch.Tensor, caches: list[LayerCache]) -> torch.Tensor:
        """logits of the tokens `idx` (B, T) that follow the positions held in `caches` (one
        per layer, extended in place); with empty caches they are logits(idx)."""
        start, t = caches[0].length, idx.shape[1]
        if start + t > self.block_size and self.wpe is not None:
            raise ValueError(f"position {start + t} is past block_size {self.block_size}")
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(start, start + t, device=idx.device))
        x = self.drop(x)
        for block, cache in zip(self.layers(), caches, strict=True):
            x = block.forward_cached(x, cache)
        return self._head(x)

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        tokens: int,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        vocab: int | None = None,
        generator: torch.Generator | None = None,
        cache: bool = True,
    ) -> torch.Tensor:
        """`idx` (B, T) extended by `tokens` sampled tokens (context cut to block_size); `vocab`
        limits sampling to the first ids (a tokenizer smaller than the output layer)."""
        new = self.stream(
            idx,
            tokens,
            temperature=temperature,
            top_k=top_k,
            vocab=vocab,
            generator=generator,
            cache=cache,
        )
        return torch.cat((idx, *new), dim=1)

    @torch.no_grad()
    def stream(
        self,
        idx: torch.Tensor,
        tokens: int,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        vocab: int | None = None,
        generator: torch.Generator | None = None,
        cache: bool = True,
    ) -> Iterator[torch.Tensor]:
        """generate's tokens one (B, 1) tensor at a time, as each is sampled.

        cache: keep each layer's keys and values, so a step computes only its new token while
        the text fits block_size. Past it the context window slides and every position's
        context changes, so the window is computed afresh each step, as without the cache."""
        caches: list[LayerCache] | None = None
        for _ in range(tokens):
            if not cache or idx.shape[1] > self.block_size:
                logits = self.logits(idx[:, -self.block_size :])
            elif caches is not None:
                logits = self.logits_cached(idx[:, -1:], caches)
            else:
                caches = self.new_caches()
                logits = self.logits_cached(idx, caches)
            scores = logits[:, -1, :vocab] / max(temperature, 1e-6)
            if top_k is not None:
                kth = torch.topk(scores, min(top_k, scores.shape[-1])).values[:, -1:]
                scores = scores.masked_fill(scores < kth, float("-inf"))
            probs = F.softmax(scores, dim=-1)
            token = torch.multinomial(probs, 1, generator=generator)
            idx = torch.cat((idx, token), dim=1)
            yield token


def gpt(num_classes: int, **options: object) -> GPT:
    return GPT(num_classes, **options)  # type: ignore[arg-type]


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def scale_residual_projections(model: GPT) -> None:
    """GPT-2: the layers that write into the residual stream start 1/sqrt(2 * n_layer) smaller,
    so the stream's variance does not grow with depth."""
    std = INIT_STD / math.sqrt(2 * model.n_layer)
    for block in model.layers():
        nn.init.normal_(block.attn.proj.weight, mean=0.0, std=std)
        mlp_proj = block.mlp.proj
        assert isinstance(mlp_proj, nn.Linear)
        nn.init.normal_(mlp_proj.weight, mean=0.0, std=std)


def _attentions(model: GPT) -> list[CausalSelfAttention]:
    return [block.attn for block in model.layers()]


def set_position(model: GPT, position: Position, *, rotary_base: float = 10_000.0) -> Swap:
    """learned: an embedding per position (GPT-2); rotary / alibi / none: no position
    parameters (the learned table is removed), positions enter attention instead."""
    removed: list[torch.Tensor] = []
    added: list[torch.Tensor] = []
    if position == "learned":
        if model.wpe is None:
            model.wpe = nn.Embedding(model.block_size, model.wte.embedding_dim)
            nn.init.normal_(model.wpe.weight, mean=0.0, std=INIT_STD)
            model.wpe.to(model.wte.weight.device)
            added.append(model.wpe.weight)
    elif model.wpe is not None:
        removed.append(model.wpe.weight)
        model.wpe = None
    for attn in _attentions(model):
        attn.position = position
        attn.rotary_base = rotary_base
    return removed, added


def set_norm(model: GPT, norm: Norm, *, eps: float = 1e-6) -> Swap:
    """Every normalisation layer made a LayerNorm or an RMSNorm (fresh: weight 1, bias 0)."""
    removed: list[torch.Tensor] = []
    added: list[torch.Tensor] = []

    def fresh(old: nn.Module) -> nn.Module:
        dim = model.wte.embedding_dim
        new = RMSNorm(dim, eps) if norm == "rms" else nn.LayerNorm(dim)
        new.to(model.wte.weight.device)
        removed.extend(old.parameters())
        added.extend(new.parameters())
        return new

    wanted = RMSNorm if norm == "rms" else nn.LayerNorm
    for block in model.layers():
        if not isinstance(block.norm_1, wanted):
            block.norm_1 = fresh(block.norm_1)
            block.norm_2 = fresh(block.norm_2)
    if not isinstance(model.norm_f, wanted):
        model.norm_f = fresh(model.norm_f)
    return removed, added


def set_mlp(model: GPT, mlp: Mlp) -> Swap:
    """Every block's MLP made the GELU one, SwiGLU or ReLU-squared (freshly initialised)."""
    removed: list[torch.Tensor] = []
    added: list[torch.Tensor] = []
    kinds: dict[str, type[GeluMlp | SwiGluMlp | ReluSquaredMlp]] = {
        "gelu": GeluMlp,
        "swiglu": SwiGluMlp,
        "relu2": ReluSquaredMlp,
    }
    wanted = kinds[mlp]
    std = INIT_STD / math.sqrt(2 * model.n_layer)
    for block in model.layers():
        if isinstance(block.mlp, wanted):
            continue
        new = wanted(model.wte.embedding_dim)
        new.apply(_init_weights)
        nn.init.normal_(new.proj.weight, mean=0.0, std=std)
        new.to(model.wte.weight.device)
        removed.extend(block.mlp.parameters())
        added.extend(new.parameters())
        block.mlp = new
    return removed, added


def set_qk_norm(model: GPT, on: bool) -> Swap:
    """RMS-normalise queries and keys per head before their dot product (bounded logits)."""
    removed: list[torch.Tensor] = []
    added: list[torch.Tensor] = []
    for attn in _attentions(model):
        if on and attn.q_norm is None:
            head_dim = attn.qkv.in_features // attn.n_head
            device = attn.qkv.weight.device
            attn.q_norm, attn.k_norm = RMSNorm(head_dim).to(device), RMSNorm(head_dim).to(device)
            added.extend([attn.q_norm.weight, attn.k_norm.weight])
        elif not on and attn.q_norm is not None and attn.k_norm is not None:
            removed.extend([attn.q_norm.weight, attn.k_norm.weight])
            attn.q_norm = attn.k_norm = None
    return removed, added


def set_weight_tying(model: GPT, on: bool) -> Swap:
    """Tied: the output layer reuses the token embedding matrix (one vocab x dim matrix less)."""
    tied = model.lm_head.weight is model.wte.weight
    if on and not tied:
        old = model.lm_head.weight
        model.lm_head.weight = model.wte.weight
        return [old], []
    if not on and tied:
        model.lm_head.weight = nn.Parameter(model.wte.weight.detach().clone())
        return [], [model.lm_head.weight]
    return [], []


def set_attention(model: GPT, attention: Attention) -> Swap:
    """fused: F.scaled_dot_product_attention; explicit: scores, mask, softmax, weights."""
    for attn in _attentions(model):
        attn.fused = attention == "fused"
    return [], []
