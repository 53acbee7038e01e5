"""The modded-nanoGPT speedrun changes that pay at small scale, as the GPT model's options.

Each is a plain function or module here, switched on by a GPT constructor option
(spotrun.train.models.gpt): `mlp="relu2"` (ReLU-squared MLP), `logit_softcap` (tanh-capped
output logits), `zero_init_proj` (residual-writing projections start at zero) and
`head_lr_scale` (an untied output layer with its own learning rate, read by the optimizer's
builder through `head_lr_groups`). What each buys on tiny Shakespeare is measured by
bench/shakespeare_time_to_loss.py --ladder (spotrun/recipes/README.md).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def soft_cap(logits: torch.Tensor, cap: float) -> torch.Tensor:
    """cap * tanh(logits / cap): logits bounded to (-cap, cap), nearly unchanged well inside
    (Gemma 2; the speedruns use 30, later 15). Keeps early large logits from saturating the
    softmax, so a higher learning rate stays stable."""
    return cap * torch.tanh(logits / cap)


class ReluSquaredMlp(nn.Module):
    """relu(x W_fc)^2 W_proj, 4x wide (Primer, So et al. 2021): GELU's cost, a sparser and
    steeper activation that learns faster in the speedruns."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, 4 * dim)
        self.proj = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.relu(self.fc(x)).square())


def zero_projections(blocks: list[Any]) -> None:
    """Each block's attention and MLP output projections set to zero (weights and biases), so
    every block starts as the identity and the residual stream carries the embeddings alone;
    gradients still reach the projections, which grow from zero (modded-nanoGPT, and
    Fixup/ReZero before it)."""
    for block in blocks:
        for proj in (block.attn.proj, block.mlp.proj):
            nn.init.zeros_(proj.weight)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)


def head_lr_groups(model: nn.Module, lr: float) -> list[dict[str, Any]]:
    """The optimizer's parameter groups: everything at `lr`, except an untied output layer of
    a model whose `head_lr_scale` is not 1, which gets its own group at lr * head_lr_scale
    (second, since the trainer reports group 0's rate). The schedules scale each group's own
    peak, so the ratio holds all through training and across a resume."""
    params = [p for p in model.parameters() if p.requires_grad]
    scale = float(getattr(model, "head_lr_scale", 1.0))
    head = getattr(getattr(model, "lm_head", None), "weight", None)
    embedding = getattr(getattr(model, "wte", None), "weight", None)
    # A head tied to the embedding (the weight_tying method) is the embedding: no own rate.
    if scale == 1.0 or head is None or head is embedding or not head.requires_grad:
        return [{"params": params}]
    rest = [p for p in params if p is not head]
    return [{"params": rest}, {"params": [head], "lr": lr * scale}]
