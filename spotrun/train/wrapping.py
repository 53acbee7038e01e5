"""Seeing through the wrappers the trainer may put around a model (DDP, torch.compile)."""

from __future__ import annotations

from torch import nn
from torch.nn.parallel import DistributedDataParallel


def unwrap_model(model: nn.Module) -> nn.Module:
    """The user's own module inside any DDP and torch.compile wrappers (for state_dicts)."""
    while True:
        if isinstance(model, DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod") and isinstance(model._orig_mod, nn.Module):
            model = model._orig_mod  # torch.compile's OptimizedModule
        else:
            return model


def without_ddp(model: nn.Module) -> nn.Module:
    """The model with DDP taken off, so a forward pass starts no collective (eval, scoring).

    A compiled model is kept compiled unless DDP sits inside the compiled wrapper.
    """
    if isinstance(model, DistributedDataParallel):
        return model.module
    inner = getattr(model, "_orig_mod", None)
    if isinstance(inner, DistributedDataParallel):
        return inner.module
    return model


def ddp_of(model: nn.Module) -> DistributedDataParallel | None:
    """The DDP wrapper around the model (also inside torch.compile's), if there is one."""
    if isinstance(model, DistributedDataParallel):
        return model
    inner = getattr(model, "_orig_mod", None)
    return inner if isinstance(inner, DistributedDataParallel) else None
