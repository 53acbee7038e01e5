"""Helpers for methods that rebuild part of a model at INIT (before any checkpoint loads)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.models.base import ImageClassifier


def replace_modules(model: nn.Module, replace: Callable[[nn.Module], nn.Module | None]) -> int:
    """Swap every submodule for which `replace` returns a module; returns how many changed.

    Children are visited before being replaced, and a replacement is not visited again, so a
    wrapper that holds the original module does not get wrapped twice.
    """
    changed = 0
    for name, child in list(model.named_children()):
        new = replace(child)
        if new is None:
            changed += replace_modules(child, replace)
        else:
            setattr(model, name, new)
            changed += 1
    return changed


def swap_parameters(
    optimizer: torch.optim.Optimizer | None,
    old: Iterable[nn.Parameter],
    new: Iterable[nn.Parameter],
) -> None:
    """Put `new` parameters where `old` ones were in the optimizer (state must be empty).

    The new ones join the param group of the first old one, with its hyperparameters.
    """
    if optimizer is None:
        return
    old_ids = {id(p) for p in old}
    new_params = [p for p in new if p.requires_grad]
    if any(id(p) in old_ids for p in optimizer.state):
        raise RuntimeError("model surgery must happen before the optimizer's first step")
    target = None
    for group in optimizer.param_groups:
        kept = [p for p in group["params"] if id(p) not in old_ids]
        if len(kept) != len(group["params"]) and target is None:
            target = group
        group["params"] = kept
    if new_params:
        (target or optimizer.param_groups[0])["params"].extend(new_params)


def require_image_classifier(model: nn.Module, method: str) -> ImageClassifier:
    if not isinstance(model, ImageClassifier):
        raise UsageError(
            f"method {method} needs a model built as an ImageClassifier (stem, body, pool, "
            f"head); {type(model).__name__} is not one",
            hint=f"switch it off with --set methods.{method}=null",
        )
    return model


def like(new: nn.Module, reference: nn.Module) -> nn.Module:
    """`new` moved to the device and dtype of `reference`'s parameters."""
    for p in reference.parameters():
        return new.to(device=p.device, dtype=p.dtype)
    return new
