"""A frozen patch-whitening first layer (as in airbench's CIFAR-10 speed runs).

The first conv's filters are the eigenvectors of the covariance of k x k image patches,
scaled by 1/sqrt(eigenvalue): its outputs are decorrelated, unit-variance patch coordinates,
which the rest of the network learns from faster. Computed from training images, frozen.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from spotrun.core.errors import UsageError
from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.data import BatchSource
from spotrun.train.events import Event
from spotrun.train.methods.options import PatchWhiteningOptions
from spotrun.train.methods.surgery import like, require_image_classifier, swap_parameters
from spotrun.train.state import State
from spotrun.train.wrapping import unwrap_model

_CHUNK = 256  # images per covariance update: bounds the memory the patches take


def patch_covariance(images: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """Covariance (float64) of all k x k patches of NCHW `images`, flattened as (C, k, k)."""
    c, k = images.shape[1], kernel_size
    dim = c * k * k
    total = torch.zeros(dim, dim, dtype=torch.float64)
    mean = torch.zeros(dim, dtype=torch.float64)
    count = 0
    for start in range(0, len(images), _CHUNK):
        chunk = images[start : start + _CHUNK].detach().to("cpu", torch.float64)
        patches = chunk.unfold(2, k, 1).unfold(3, k, 1)  # N, C, H', W', k, k
        flat = patches.permute(0, 2, 3, 1, 4, 5).reshape(-1, dim)
        total += flat.T @ flat
        mean += flat.sum(0)
        count += len(flat)
    if count == 0:
        raise ValueError(f"images of size {tuple(images.shape[-2:])} have no {k}x{k} patches")
    mean /= count
    return total / count - torch.outer(mean, mean)


def patch_whitening_weights(
    images: torch.Tensor, kernel_size: int = 2, eps: float = 5e-4
) -> torch.Tensor:
    """Conv weights (2*C*k*k, C, k, k) that whiten k x k patches: each eigenvector of the patch
    covariance scaled by 1/sqrt(eigenvalue + eps), then the same filters negated (so a ReLU
    after them loses nothing). Deterministic for given images.

    Helps: airbench-style short CIFAR runs reach a given accuracy in fewer epochs. Cost: one
    eigendecomposition at start-up; a wider first layer. Conflicts: none; the images must be
    normalised the way training inputs are (pass training batches).
    """
    cov = patch_covariance(images, kernel_size)
    eigenvalues, eigenvectors = torch.linalg.eigh(cov)
    filters = eigenvectors.T / torch.sqrt(eigenvalues.clamp(min=0) + eps).unsqueeze(1)
    weight = filters.reshape(-1, images.shape[1], kernel_size, kernel_size)
    return torch.cat([weight, -weight]).to(torch.float32)


def _first_conv(module: nn.Module) -> tuple[nn.Module, str, nn.Conv2d]:
    for parent in module.modules():
        for name, child in parent.named_children():
            if isinstance(child, nn.Conv2d):
                return parent, name, child
    raise UsageError(
        "patch_whitening found no Conv2d in the model's stem",
        hint="switch it off with --set methods.patch_whitening=null",
    )


def apply_patch_whitening(
    model: nn.Module,
    images: torch.Tensor,
    *,
    kernel_size: int = 2,
    eps: float = 5e-4,
    optimizer: torch.optim.Optimizer | None = None,
) -> nn.Module:
    """Give an ImageClassifier a frozen whitening first layer.

    A model that has its own whitening layer, a Conv2d at `stem.whiten` (the fast CIFAR net),
    gets its weights filled and frozen there (a bias stays trainable). Otherwise a whitening
    conv goes in front of the stem and the stem's first conv is rebuilt to take the whitened
    channels (freshly initialised; the optimizer, if given, trains it instead of the old
    one). The whitening conv has no padding, so each image side shrinks by kernel_size - 1."""
    net = require_image_classifier(model, "patch_whitening")
    weight = patch_whitening_weights(images, kernel_size, eps)
    own = getattr(net.stem, "whiten", None)
    if isinstance(own, nn.Conv2d):
        if tuple(own.weight.shape) != tuple(weight.shape):
            raise UsageError(
                f"patch_whitening: the model's whitening layer has weights of shape "
                f"{tuple(own.weight.shape)}, patches of {kernel_size}x{kernel_size} over "
                f"{images.shape[1]} channels need {tuple(weight.shape)}",
                hint=f"set methods.patch_whitening.kernel_size={own.kernel_size[0]}",
            )
        with torch.no_grad():
            own.weight.copy_(weight)
        own.weight.requires_grad_(False)
        return net
    stem = net.stem
    if isinstance(stem, nn.Conv2d):
        stem = nn.Sequential(stem)
    parent, name, conv = _first_conv(stem)
    if conv.in_channels != images.shape[1]:
        raise UsageError(
            f"patch_whitening: images have {images.shape[1]} channels, the first conv takes "
            f"{conv.in_channels}"
        )
    whiten = nn.Conv2d(images.shape[1], len(weight), kernel_size, bias=False)
    with torch.no_grad():
        whiten.weight.copy_(weight)
    whiten.weight.requires_grad_(False)
    rebuilt = nn.Conv2d(
        len(weight),
        conv.out_channels,
        conv.kernel_size,  # type: ignore[arg-type]
        stride=conv.stride,  # type: ignore[arg-type]
        padding=conv.padding,  # type: ignore[arg-type]
        dilation=conv.dilation,  # type: ignore[arg-type]
        groups=1,
        bias=conv.bias is not None,
    )
    rebuilt = like(rebuilt, conv)  # type: ignore[assignment]
    swap_parameters(optimizer, conv.parameters(), rebuilt.parameters())
    setattr(parent, name, rebuilt)
    net.stem = nn.Sequential(OrderedDict(whiten=like(whiten, conv), stem=stem))
    return net


def collect_images(data: BatchSource, count: int) -> torch.Tensor:
    """The first `count` training images of epoch 0's order (the same on every run)."""
    taken: list[torch.Tensor] = []
    have = 0
    for inputs, _ in data.batches(0):
        taken.append(inputs[: count - have])
        have += len(taken[-1])
        if have >= count:
            break
    return torch.cat(taken)


class PatchWhitening(AlgorithmBase):
    name = "patch_whitening"
    events = frozenset({Event.INIT})

    def __init__(self, options: PatchWhiteningOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        if state.train_data is None:
            raise UsageError("patch_whitening needs the training data to compute its filters")
        images = collect_images(state.train_data, self.options.num_images)
        apply_patch_whitening(
            unwrap_model(state.model),
            images,
            kernel_size=self.options.kernel_size,
            eps=self.options.eps,
            optimizer=state.optimizer,
        )
