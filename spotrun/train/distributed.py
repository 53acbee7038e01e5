"""Multi-process training under torchrun: who we are, and how ranks agree.

`spotrun train` reads torchrun's RANK / WORLD_SIZE / LOCAL_RANK and joins the process group
when WORLD_SIZE > 1. Besides the training backend (NCCL on GPUs, gloo on the CPU) every run
gets a gloo group for control messages: whether to stop, RNG states for checkpoints, the
checkpoint itself on resume. Those are small CPU objects, and sending them over gloo never
makes a GPU stream wait.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from spotrun.core.errors import UsageError


@dataclass(frozen=True)
class LaunchEnv:
    """What torchrun (or nothing) told this process about its place in the job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 0  # processes on this machine; 0: all of world_size

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> LaunchEnv:
        env = dict(os.environ if environ is None else environ)
        try:
            rank = int(env.get("RANK", "0"))
            world = int(env.get("WORLD_SIZE", "1"))
            local = int(env.get("LOCAL_RANK", str(rank)))
            local_world = int(env.get("LOCAL_WORLD_SIZE", "0"))
        except ValueError as exc:
            raise UsageError(
                f"RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE must be integers ({exc})",
                hint="start multi-process training with torchrun",
            ) from exc
        if world < 1 or not 0 <= rank < world:
            raise UsageError(f"RANK={rank} does not fit WORLD_SIZE={world}")
        return cls(rank, world, local, local_world)

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def processes_here(self) -> int:
        """This machine's processes of the job (they share its memory on the CPU)."""
        return self.local_world_size or self.world_size

    def device(self) -> torch.device:
        if torch.cuda.is_available():
            return torch.device("cuda", self.local_rank % max(1, torch.cuda.device_count()))
        return torch.device("cpu")


def init_process_group(env: LaunchEnv) -> bool:
    """Join the job's process group; True if this call joined it (MASTER_ADDR/PORT come from
    torchrun)."""
    if not env.distributed or dist.is_initialized():
        return False
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        raise UsageError(
            f"WORLD_SIZE={env.world_size} but MASTER_ADDR/MASTER_PORT are not set",
            hint="launch with torchrun --nproc-per-node N -m spotrun train ...",
        )
    device = env.device()
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend="nccl" if device.type == "cuda" else "gloo",
        rank=env.rank,
        world_size=env.world_size,
    )
    return True


def leave_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


@dataclass
class Cluster:
    """The ranks of this job as the trainer sees them; a no-op for a single process."""

    rank: int = 0
    world_size: int = 1
    _control: Any = field(default=None, repr=False)

    @classmethod
    def current(cls) -> Cluster:
        if not (dist.is_available() and dist.is_initialized()):
            return cls()
        world = dist.get_world_size()
        # A gloo group for control messages; every rank creates it in the same order.
        control = dist.new_group(backend="gloo") if world > 1 else None
        return cls(dist.get_rank(), world, control)

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def agree_to_stop(self, local_signal: int | None) -> int | None:
        """The stop signal if any rank has one, else None; every rank gets the same answer.

        Called at every step boundary, so all ranks stop after the same step.
        """
        if not self.distributed:
            return local_signal
        flag = torch.tensor([local_signal or 0], dtype=torch.int64)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._control)
        agreed = int(flag.item())
        return agreed or None

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """Elementwise sum over ranks (float64 on the CPU, so sums stay exact and ordered)."""
        if not self.distributed:
            return values
        out = values.detach().to("cpu", torch.float64).clone()
        dist.all_reduce(out, group=self._control)
        return out

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank."""
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj, group=self._control)
        return out

    def broadcast_from_main(self, obj: Any) -> Any:
        if not self.distributed:
            return obj
        box = [obj if self.is_main else None]
        dist.broadcast_object_list(box, src=0, group=self._control)
        return box[0]

    def sync_buffers(self, module: torch.nn.Module) -> None:
        """Rank 0's buffers (BatchNorm statistics) on every rank.

        DDP sends rank 0's buffers before each forward pass, so each rank's own statistics
        after its last pass are never trained on; evaluation uses rank 0's, the checkpointed ones.
        """
        if not self.distributed:
            return
        for buffer in module.buffers():
            dist.broadcast(buffer, src=0)

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier(group=self._control)
