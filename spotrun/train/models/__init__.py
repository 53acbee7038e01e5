"""Model registry: a recipe names its model and the registry builds it (torch imported lazily)."""

from __future__ import annotations

import difflib
import importlib
from typing import TYPE_CHECKING

from spotrun.core.errors import UsageError

if TYPE_CHECKING:
    from torch import nn

# name -> "module:factory"; each factory takes num_classes plus the recipe's model_options.
MODELS: dict[str, str] = {
    "digits-net": "spotrun.train.models.small:DigitsNet",
    "resnet18": "spotrun.train.models.resnet:resnet18",
    "resnet34": "spotrun.train.models.resnet:resnet34",
    "resnet50": "spotrun.train.models.resnet:resnet50",
    "resnet101": "spotrun.train.models.resnet:resnet101",
    "cifar-fastnet": "spotrun.train.models.fastnet:fast_cifar_net",
    "small-resnet": "spotrun.train.models.small:SmallResNet",
    "gpt": "spotrun.train.models.gpt:gpt",
}


def check_model_name(name: str) -> None:
    if name not in MODELS:
        close = difflib.get_close_matches(name, MODELS, n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(MODELS)}"
        raise UsageError(f"unknown model '{name}'", hint=hint)


def build_model(name: str, num_classes: int, **options: object) -> nn.Module:
    check_model_name(name)
    module_name, _, attr = MODELS[name].partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    try:
        model: nn.Module = factory(num_classes=num_classes, **options)
    except TypeError as exc:
        raise UsageError(f"model {name}: bad model_options ({exc})") from exc
    return model
