"""The maths of a decoder-only transformer's parts, as plain functions on tensors.

The GPT model (spotrun.train.models.gpt) calls these, and the language-model methods
(rotary, ALiBi, RMSNorm, SwiGLU, QK norm, fused attention) switch between them; each is also
exported from spotrun.train.functional for use in any training loop.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def rotary_tables(
    length: int, head_dim: int, base: float = 10_000.0, device: torch.device | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape (length, head_dim // 2): position t turns pair i by t * base^(-2i/d)."""
    if head_dim % 2:
        raise ValueError(f"rotary embeddings need an even head dimension, got {head_dim}")
    inv_freq = base ** (
        -torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim
    )
    angles = torch.outer(torch.arange(length, device=device, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each (first half, second half) pair of x (B, H, T, D) by its position's angle.

    RoFormer (Su et al., 2021): q.k then depends on positions only through their difference,
    with no position parameters. Rotations keep vector norms.
    """
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[: x.shape[-2]].to(x.dtype), sin[: x.shape[-2]].to(x.dtype)
    return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)


def alibi_slopes(n_head: int) -> torch.Tensor:
    """ALiBi's per-head slopes: the geometric sequence 2^(-8/n), 2^(-16/n), ... (Press et al.)."""
    closest = 2 ** math.floor(math.log2(n_head))
    base = [2.0 ** (-8.0 * (i + 1) / closest) for i in range(closest)]
    extra = [2.0 ** (-4.0 * (2 * i + 1) / closest) for i in range(n_head - closest)]
    return torch.tensor(base + extra)


def alibi_bias(n_head: int, length: int, device: torch.device | None = None) -> torch.Tensor:
    """(n_head, length, length) additive attention bias: -slope * distance, -inf ahead (causal)."""
    pos = torch.arange(length, device=device)
    distance = (pos[:, None] - pos[None, :]).float()
    bias = -alibi_slopes(n_head).to(device)[:, None, None] * distance
    return bias.masked_fill(distance < 0, float("-inf"))


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6
) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) over the last dimension, times weight: LayerNorm without the
    mean subtraction and bias (Zhang & Sennrich, 2019), cheaper by one reduction."""
    out = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return out * weight if weight is not None else out


def swiglu(
    x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor
) -> torch.Tensor:
    """The gated MLP of Shazeer (2020): (silu(x W_gate) * x W_up) W_down, weights as nn.Linear's."""
    return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)


def causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    fused: bool = True,
) -> torch.Tensor:
    """Causal softmax attention of q, k, v (B, H, T, D); `bias` (H, T, T) is added to the scores
    and must itself mask the future (ALiBi's does). fused: one F.scaled_dot_product_attention
    call (a flash or memory-efficient kernel where the hardware has one); otherwise the explicit
    scores-softmax-weights product, which materialises the (T, T) matrix."""
    if fused:
        if bias is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if bias is None:
        future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    else:
        scores = scores + bias.to(scores.dtype)
    return F.softmax(scores, dim=-1) @ v


def attention_to_past(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    fused: bool = True,
) -> torch.Tensor:
    """causal_attention for the last queries only: q (B, H, t, D) are the last t of the T
    positions of k and v (B, H, T, D), as when generating with cached keys and values; `bias`
    (H, t, T) must mask the future itself."""
    t, total = q.shape[-2], k.shape[-2]
    future = None
    if bias is None and t > 1:
        future = torch.ones(t, total, dtype=torch.bool, device=q.device).triu(total - t + 1)
    if fused:
        mask = bias.to(q.dtype) if bias is not None else None if future is None else ~future
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    elif future is not None:
        scores = scores.masked_fill(future, float("-inf"))
    return F.softmax(scores, dim=-1) @ v


def qk_normalize(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor | None = None,
    k_weight: torch.Tensor | None = None,
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries and keys RMS-normalised per head (Dehghani et al., 2023; the modded-nanoGPT
    speedruns): attention logits stay bounded, so higher learning rates stay stable."""
    return rms_norm(q, q_weight, eps), rms_norm(k, k_weight, eps)
