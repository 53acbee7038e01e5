"""Muon: momentum whose every matrix update is orthogonalised, beside AdamW for the rest.

Written from Keller Jordan's description ("Muon: An optimizer for hidden layers in neural
networks", 2024): take SGD's Nesterov momentum of a weight matrix's gradient, replace that
update by the nearest semi-orthogonal matrix (all singular values ~1, computed by a quintic
Newton-Schulz iteration rather than an SVD), scale it by sqrt(max(1, rows / cols)) so that
tall and wide matrices move alike, and step. Only hidden layers' matrices are Muon's: the
embeddings, the output head, and every bias and gain (1-D) go to AdamW, in the same optimizer
(one state dict, so a checkpoint resumes it exactly).

Conv filters are flattened to 2-D (out_channels x in_channels*kh*kw), the linear map a conv
applies to each patch, and are Muon's: this is how Keller Jordan's CIFAR-10 speedruns use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

# The quintic's coefficients from the write-up: chosen to push every singular value in
# (0, 1] fast towards 1, at the price of landing in a band around it (~0.7-1.2), not on it.
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5
NORM_EPS = 1e-7


def newton_schulz(matrix: torch.Tensor, steps: int = NS_STEPS) -> torch.Tensor:
    """An approximately semi-orthogonal matrix with `matrix`'s singular vectors (U V^T).

    The input is scaled to Frobenius norm 1 (so every singular value is at most 1), and
    iterated in float32: on a CPU bf16 can be slower than fp32, and fp32 keeps it exact
    from run to run."""
    if matrix.ndim != 2:
        raise ValueError(f"newton_schulz needs a matrix, got shape {tuple(matrix.shape)}")
    a, b, c = NS_COEFFICIENTS
    x = matrix.float()
    wide = x.size(0) <= x.size(1)
    if not wide:  # iterate on the smaller Gram matrix
        x = x.T
    x = x / (x.norm() + NORM_EPS)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return (x if wide else x.T).to(matrix.dtype)


def orthogonal_update(update: torch.Tensor) -> torch.Tensor:
    """`update` (a matrix, or a conv filter bank flattened to one) orthogonalised and scaled
    by sqrt(max(1, rows / cols)), in `update`'s own shape."""
    flat = update.reshape(update.size(0), -1)
    scale = max(1.0, flat.size(0) / flat.size(1)) ** 0.5
    return (newton_schulz(flat) * scale).view_as(update)


@dataclass(frozen=True)
class MuonSplit:
    """Which parameters each half of the optimizer takes."""

    matrices: list[nn.Parameter]  # hidden layers' weights (>= 2-D): Muon
    others: list[nn.Parameter]  # embeddings, the output head, biases, gains: AdamW


def split_for_muon(model: nn.Module) -> MuonSplit:
    """The usual split: every trainable weight of >= 2 dimensions is Muon's, except the
    embeddings' and the output head's (the last nn.Linear in the model's module order), which
    are AdamW's with every 1-D parameter. A tied head is the embedding: AdamW's too."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    adamw_ids = {id(linears[-1].weight)} if linears else set()
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            adamw_ids.add(id(module.weight))
    matrices: list[nn.Parameter] = []
    others: list[nn.Parameter] = []
    for param in model.parameters():  # each shared parameter once
        if not param.requires_grad:
            continue
        is_matrix = param.ndim >= 2 and id(param) not in adamw_ids
        (matrices if is_matrix else others).append(param)
    return MuonSplit(matrices, others)


class Muon(torch.optim.Optimizer):
    """Muon for the groups marked `muon: True`, AdamW (decoupled weight decay) for the rest.

    A 1-D parameter that lands in a Muon group (a method's model surgery adds parameters to
    the group of those it replaced) is stepped by AdamW's rule with that group's settings."""

    def __init__(
        self,
        groups: Iterable[dict[str, Any]],
        *,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.95,
        nesterov: bool = True,
    ) -> None:
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            nesterov=nesterov,
            muon=False,
        )
        super().__init__(list(groups), defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                if group["muon"] and param.ndim >= 2:
                    self._muon_step(param, group)
                else:
                    self._adamw_step(param, group)
        return loss

    def _muon_step(self, param: torch.Tensor, group: dict[str, Any]) -> None:
        grad = param.grad
        assert grad is not None
        state = self.state[param]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(param)
        buffer: torch.Tensor = state["momentum_buffer"]
        beta = group["momentum"]
        buffer.lerp_(grad, 1 - beta)
        # Nesterov: look ahead along the momentum (gradient pulled towards the new buffer).
        update = grad.lerp(buffer, beta) if group["nesterov"] else buffer
        param.mul_(1 - group["lr"] * group["weight_decay"])
        param.add_(orthogonal_update(update), alpha=-group["lr"])

    def _adamw_step(self, param: torch.Tensor, group: dict[str, Any]) -> None:
        grad = param.grad
        assert grad is not None
        state = self.state[param]
        if "step" not in state:
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(param)
            state["exp_avg_sq"] = torch.zeros_like(param)
        state["step"] += 1
        step = float(state["step"])
        beta1, beta2 = group["betas"]
        exp_avg: torch.Tensor = state["exp_avg"]
        exp_avg_sq: torch.Tensor = state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step_size = group["lr"] / (1 - beta1**step)
        denom = (exp_avg_sq / (1 - beta2**step)).sqrt_().add_(group["eps"])
        param.mul_(1 - group["lr"] * group["weight_decay"])
        param.addcdiv_(exp_avg, denom, value=-step_size)


def muon_for(
    model: nn.Module,
    *,
    lr: float,
    muon_lr: float,
    momentum: float,
    weight_decay: float,
) -> Muon:
    """Muon over `model` with the usual split. The AdamW group comes first: a method that only
    adds parameters (a norm's gains) puts them in group 0, and the trainer reports its lr."""
    split = split_for_muon(model)
    groups = [
        {"params": split.others, "muon": False},
        {"params": split.matrices, "muon": True, "lr": muon_lr},
    ]
    return Muon(
        [g for g in groups if g["params"]],
        lr=lr,
        weight_decay=weight_decay,
        momentum=momentum,
    )
