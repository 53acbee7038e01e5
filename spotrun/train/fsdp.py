"""FSDP: a model's parameters, gradients and optimizer state sharded over the run's processes.

Under DDP every process holds the whole training state (weights, gradients, the optimizer's
moments: 16 bytes a parameter with AdamW in fp32), so a model whose state does not fit one
device cannot train at all. torch's `fully_shard` (FSDP2) keeps 1/world_size of each on every
process and gathers a block's weights only while that block computes.

The recipe's `fsdp` setting says when: `off`, `on` (whenever there is more than one process),
or `auto`: on when the training state would take more than half of one device's memory (the
rest is for activations). One process never shards: there is nothing to shard over.

Checkpoints are consolidated: every tensor gathered whole and saved by rank 0 in the same
format a process without FSDP writes, so a run checkpointed under FSDP on N processes resumes
on any other number, with FSDP or without, and continues exactly (the global batch is the
contract, spotrun.train.batch_plan).

Plain form: `shard_model(model, optimizer)`; trainer form: the `FullyShard` algorithm, which
shards at INIT after every method's model surgery; the trainer then wraps no DDP around it.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from spotrun.core.errors import UsageError
from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.state import State

FsdpSetting = Literal["off", "on", "auto"]
# Of one device's memory, what the training state may take before `auto` shards it; the rest
# holds activations, which grow with the per-device batch.
STATE_MEMORY_FRACTION = 0.5
# Methods that keep a whole copy of the weights beside the model's (an average): their
# plain tensors cannot be mixed with the sharded ones.
UNSHARDABLE_METHODS = ("ema", "swa")


@dataclass(frozen=True)
class FsdpChoice:
    on: bool
    reason: str  # for the training line: why it is on or off here


def optimizer_slots(optimizer: torch.optim.Optimizer) -> int:
    """Tensors the optimizer keeps per parameter (Adam's two moments, SGD's momentum)."""
    if isinstance(optimizer, torch.optim.SGD):
        return 1 if any(g.get("momentum", 0) for g in optimizer.param_groups) else 0
    return 2  # Adam, AdamW, Muon's AdamW half: the most any spotrun optimizer keeps


def training_state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Bytes of weights, gradients and optimizer state for `model`, unsharded."""
    per_copy = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() * p.element_size() for p in model.parameters() if not p.requires_grad)
    return per_copy * (2 + optimizer_slots(optimizer)) + frozen


def device_memory_bytes(device: torch.device, local_processes: int) -> int:
    """One device's memory; on the CPU, this process's part of the machine's memory."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(total // max(1, local_processes))


def decide_fsdp(
    setting: FsdpSetting,
    state_bytes: int,
    memory_bytes: int,
    world_size: int,
) -> FsdpChoice:
    """Whether to shard: a pure function of the setting, the sizes and the process count."""
    gib = 1 << 30
    sizes = f"training state {state_bytes / gib:.2f} GiB, device {memory_bytes / gib:.1f} GiB"
    if setting == "off":
        return FsdpChoice(False, "fsdp off")
    if world_size < 2:
        return FsdpChoice(False, f"fsdp {setting}: one process, nothing to shard over")
    if setting == "on":
        return FsdpChoice(True, f"fsdp on: sharded over {world_size} processes ({sizes})")
    if state_bytes > STATE_MEMORY_FRACTION * memory_bytes:
        return FsdpChoice(True, f"fsdp auto: on, sharded over {world_size} processes ({sizes})")
    return FsdpChoice(False, f"fsdp auto: off, the state fits one device ({sizes})")


def choose_fsdp(
    setting: FsdpSetting,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    *,
    world_size: int,
    processes_here: int,
    methods: Collection[str] = (),
) -> FsdpChoice:
    """`decide_fsdp` for this model, optimizer and device; UsageError where it would shard
    a model that one of `methods` keeps a whole copy of."""
    if setting == "off":
        return FsdpChoice(False, "fsdp off")
    state_bytes = training_state_bytes(model, optimizer)
    memory = device_memory_bytes(device, processes_here)
    choice = decide_fsdp(setting, state_bytes, memory, world_size)
    clash = [m for m in UNSHARDABLE_METHODS if m in methods]
    if choice.on and clash:
        raise UsageError(
            f"{choice.reason}, but {', '.join(clash)} keeps a whole copy of the weights",
            hint=f"drop {' and '.join(clash)} (--set methods.{clash[0]}=null) or --set fsdp=off",
        )
    return choice


def fsdp_of(model: nn.Module) -> FSDPModule | None:
    """The FSDP root of the model (also inside torch.compile's wrapper), if sharded."""
    inner = getattr(model, "_orig_mod", model)
    return inner if isinstance(inner, FSDPModule) else None


def shard_model(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> nn.Module:
    """Shard `model` in place over the default process group and return it.

    Each module held in an nn.ModuleList (a transformer's blocks) is its own unit, so only
    one block's weights are whole at a time; the root takes the rest (embeddings, head). The
    optimizer's parameters become the sharded ones in the same places (its state must be
    empty: shard before the first step).
    """
    before = list(model.parameters())
    for holder in model.modules():
        if isinstance(holder, nn.ModuleList):
            for block in holder:
                if any(True for _ in block.parameters()):
                    fully_shard(block)
    fully_shard(model)
    if optimizer is not None:
        if optimizer.state:
            raise RuntimeError("shard the model before the optimizer's first step")
        sharded = dict(zip((id(p) for p in before), model.parameters(), strict=True))
        for group in optimizer.param_groups:
            group["params"] = [sharded[id(p)] for p in group["params"]]
    return model


@contextmanager
def gradient_sync(model: nn.Module, *, enabled: bool) -> Iterator[None]:
    """Reduce-scatter the gradients after this backward pass only if `enabled` (FSDP's
    no_sync: accumulated micro-batches exchange gradients once, after the last)."""
    root = fsdp_of(model)
    if root is None or enabled:
        yield
        return
    root.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        root.set_requires_gradient_sync(True)


def _whole(value: Any) -> Any:
    # full_tensor() is a collective: every rank calls it in the same order.
    return value.full_tensor().cpu() if isinstance(value, DTensor) else value


def full_model_state(model: nn.Module) -> dict[str, Any]:
    """The model's state_dict with every shard gathered whole, on every rank (a model
    without FSDP: its plain state_dict)."""
    return {name: _whole(value) for name, value in model.state_dict().items()}


def full_optimizer_state(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's state_dict with whole tensors: what it would be without FSDP."""
    saved = optimizer.state_dict()
    state = {
        index: {key: _whole(value) for key, value in slots.items()}
        for index, slots in sorted(saved["state"].items())
    }
    return {**saved, "state": state}


def _shard_like(value: Any, like: Any) -> Any:
    """`value` (whole, the same on every rank) cut to this rank's shard of `like`."""
    if isinstance(like, DTensor) and isinstance(value, torch.Tensor) and value.shape == like.shape:
        # Every rank holds the whole checkpoint already, so each takes its own part: no sends.
        whole = value.to(like.device, like.dtype)
        return distribute_tensor(whole, like.device_mesh, like.placements, src_data_rank=None)
    return value


def load_full_model_state(model: nn.Module, state: dict[str, Any]) -> None:
    """Load a whole (consolidated) state_dict into a model, sharded or not."""
    current = model.state_dict()
    model.load_state_dict({k: _shard_like(v, current.get(k)) for k, v in state.items()})


def load_full_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load a whole optimizer state_dict into an optimizer, over sharded parameters or not."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    sharded: dict[Any, Any] = {}
    for index, slots in state["state"].items():
        like = params[index] if isinstance(index, int) and index < len(params) else None
        # The step count stays whole even where a parameter is a scalar of its shape.
        sharded[index] = {
            key: value if key == "step" else _shard_like(value, like)
            for key, value in slots.items()
        }
    optimizer.load_state_dict({**state, "state": sharded})


class FullyShard(AlgorithmBase):
    """The trainer form: shards the model at INIT, after the methods' model surgery."""

    name = "fsdp"
    events = frozenset({Event.INIT})

    def apply(self, event: Event, state: State) -> None:
        if state.world_size > 1 and fsdp_of(state.model) is None:
            state.model = shard_model(state.model, state.optimizer)
