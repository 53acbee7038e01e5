"""The trainer loop: short enough to read in one sitting, with exact resume built in.

Behaviour beyond the plain loop comes from algorithms (which may change the state at events)
and callbacks (which only observe). The trainer owns three things itself because a spot run
depends on them: checkpoints, resume, and stopping cleanly on a signal, on every rank at once.

Order of construction matters for resume: the model is built, INIT runs the methods' model
surgery (BlurPool, concat pooling, channels_last, ...) and FSDP's sharding (spotrun.train.fsdp,
last), DDP wraps the result where nothing sharded it, and only then does `fit` load a
checkpoint into it, so the checkpoint meets the same model it was saved from.
"""

from __future__ import annotations

import logging
import math
import signal
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from spotrun.core.errors import TrainingError
from spotrun.train.algorithm import Algorithm, Engine
from spotrun.train.batch_plan import split_micro_batches
from spotrun.train.callbacks import Callback
from spotrun.train.checkpoint import Checkpointer, LoadedCheckpoint, rng_state, set_rng_state
from spotrun.train.data import BatchSource, TrainingBatches
from spotrun.train.distributed import Cluster
from spotrun.train.events import Event
from spotrun.train.fsdp import (
    fsdp_of,
    full_model_state,
    full_optimizer_state,
    gradient_sync,
    load_full_model_state,
    load_full_optimizer_state,
)
from spotrun.train.state import State
from spotrun.train.wrapping import ddp_of, unwrap_model

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


@dataclass(frozen=True)
class FitResult:
    interrupted: bool  # True: a checkpoint was written on request and training should resume
    metrics: dict[str, float]
    step: int
    epoch: int


class Trainer:
    def __init__(
        self,
        *,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        train_data: TrainingBatches,
        eval_data: BatchSource | None,
        max_epochs: int,
        algorithms: Sequence[Algorithm] = (),
        callbacks: Sequence[Callback] = (),
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = F.cross_entropy,
        checkpoint_dir: Path | None = None,
        checkpoint_every_steps: int | None = None,
        eval_every_epochs: int = 1,
        config: dict[str, Any] | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        self.cluster = Cluster.current()
        self.state = State(
            model=model,
            optimizer=optimizer,
            loss_fn=loss_fn,
            max_epochs=max_epochs,
            steps_per_epoch=len(train_data),
            device=torch.device(device),
            rank=self.cluster.rank,
            world_size=self.cluster.world_size,
            train_data=train_data,
        )
        self.train_data = train_data
        self.eval_data = eval_data
        self.engine = Engine(algorithms)
        self.callbacks = list(callbacks)
        self.checkpointer = Checkpointer(checkpoint_dir) if checkpoint_dir else None
        self.checkpoint_every_steps = checkpoint_every_steps
        self.eval_every_epochs = max(1, eval_every_epochs)
        self.config = config or {}
        self.resumed_from: Path | None = None
        self._saved_step: int | None = None
        self._event(Event.INIT)
        # A model the fsdp method sharded at INIT exchanges its own gradients: no DDP around it.
        if self.cluster.distributed and fsdp_of(self.state.model) is None:
            self.state.model = self._wrap_ddp(self.state.model)

    def _wrap_ddp(self, model: nn.Module) -> nn.Module:
        device = self.state.device
        ids = [device.index] if device.type == "cuda" else None
        # DDP broadcasts rank 0's weights and buffers here, so every rank starts alike.
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)

    # ------------------------------------------------------------------ events
    def _event(self, event: Event) -> None:
        self.engine.run(event, self.state)
        for callback in self.callbacks:
            callback.on_event(event, self.state)

    # ------------------------------------------------------------------- fit
    def fit(self) -> FitResult:
        s = self.state
        previous = {sig: signal.signal(sig, self._on_stop_signal) for sig in STOP_SIGNALS}
        try:
            self._resume()
            self._event(Event.FIT_START)
            while s.epoch < s.max_epochs:
                if self._train_epoch():
                    return self._interrupt()
                self._after_epoch()
                if self._stop_agreed():
                    return self._interrupt()
            self._event(Event.FIT_END)
            return FitResult(False, dict(s.metrics), s.step, s.epoch)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_stop_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.state.stop_signal = signum

    def _stop_agreed(self) -> bool:
        """True on every rank once any rank was asked to stop (checked after every step)."""
        s = self.state
        agreed = self.cluster.agree_to_stop(s.stop_signal)
        if agreed is not None and s.stop_signal is None:
            s.stop_signal = agreed  # another rank got the signal; stop here with it
        return agreed is not None

    def _train_epoch(self) -> bool:
        """Train the rest of the current epoch; True if a stop was agreed mid-epoch."""
        s = self.state
        s.model.train()
        if s.batch_index == 0:
            s.epoch_loss_sum = torch.zeros((), dtype=torch.float64, device=s.device)
            s.epoch_loss_count = 0
            self._event(Event.EPOCH_START)
        for inputs, targets in self.train_data.batches(s.epoch, start=s.batch_index):
            started = time.perf_counter()
            self._train_batch(inputs, targets)
            s.train_seconds += time.perf_counter() - started
            if self._checkpoint_due():
                self.save_checkpoint()
            if self._stop_agreed():
                return True
        return False

    def _train_batch(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """One optimizer step on this rank's share of the step's global batch, cut into the
        plan's micro-batches; gradients are exchanged between ranks after the last one only."""
        s = self.state
        s.skip_step = False
        self._event(Event.BATCH_START)
        s.optimizer.zero_grad(set_to_none=True)
        parts = split_micro_batches(inputs, targets, self.train_data.plan.accumulation)
        for i, (micro_inputs, micro_targets) in enumerate(parts):
            # Each micro-batch's mean loss weighs by its part of the share, so the gradient is
            # the share's mean: what one process computing the whole share would get.
            weight = len(micro_inputs) / len(inputs)
            with self._gradient_sync(last=i == len(parts) - 1):
                self._forward_backward(micro_inputs, micro_targets, weight)
        self._event(Event.AFTER_BACKWARD)
        self._event(Event.BEFORE_OPTIMIZER_STEP)
        if not s.skip_step:
            s.optimizer.step()
        self._event(Event.AFTER_OPTIMIZER_STEP)
        s.step += 1
        s.batch_index += 1
        self._event(Event.BATCH_END)
        s.inputs = s.targets = s.outputs = s.loss = None

    def _forward_backward(self, inputs: torch.Tensor, targets: torch.Tensor, weight: float) -> None:
        """One micro-batch: its own pass through the batch methods, forward, loss, backward."""
        s = self.state
        s.inputs = inputs.to(s.device, non_blocking=True)
        s.targets = targets.to(s.device, non_blocking=True)
        self._event(Event.AFTER_DATALOADER)
        self._event(Event.BEFORE_FORWARD)
        s.outputs = s.model(s.inputs)
        self._event(Event.AFTER_FORWARD)
        self._event(Event.BEFORE_LOSS)
        s.loss = s.loss_fn(s.outputs, s.targets)
        self._event(Event.AFTER_LOSS)
        # Summed on the device (no sync per step), before a method may scale the loss.
        s.epoch_loss_sum += s.loss.detach()  # float64 += float32: exact promotion
        s.epoch_loss_count += 1
        self._event(Event.BEFORE_BACKWARD)
        # A weight of 1/2^k scales every gradient exactly, so 2 processes x B and 1 process x
        # B x 2 accumulated add the same numbers.
        (s.loss if weight == 1.0 else s.loss * weight).backward()

    def _gradient_sync(self, *, last: bool) -> AbstractContextManager[object]:
        """DDP's gradient all-reduce (FSDP's reduce-scatter) only on a step's last micro-batch."""
        if fsdp_of(self.state.model) is not None:
            return gradient_sync(self.state.model, enabled=last)
        ddp = ddp_of(self.state.model)
        if ddp is None or last:
            return nullcontext()
        return ddp.no_sync()

    def _after_epoch(self) -> None:
        s = self.state
        self._event(Event.EPOCH_END)
        s.epoch += 1
        s.batch_index = 0
        if s.epoch % self.eval_every_epochs == 0 or s.epoch == s.max_epochs:
            started = time.perf_counter()
            self.evaluate()
            s.train_seconds += time.perf_counter() - started
        if self.checkpointer is not None:
            self.save_checkpoint()

    def _checkpoint_due(self) -> bool:
        every = self.checkpoint_every_steps
        return self.checkpointer is not None and every is not None and self.state.step % every == 0

    def _interrupt(self) -> FitResult:
        s = self.state
        self._event(Event.INTERRUPT)
        if self.checkpointer is not None and self._saved_step != s.step:
            self.save_checkpoint()
        # No rank leaves before rank 0 has written: torchrun tears down the others when one exits.
        self.cluster.barrier()
        return FitResult(True, dict(s.metrics), s.step, s.epoch)

    # -------------------------------------------------------------- evaluate
    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        s = self.state
        self._event(Event.EVAL_START)
        model = s.evaluation_model()
        self.cluster.sync_buffers(model)
        was_training = model.training
        model.eval()
        # correct, seen, loss sum, then the train loss sum and count of this epoch
        sums = torch.zeros(5, dtype=torch.float64, device=s.device)
        if self.eval_data is not None:
            # Under FSDP every forward pass gathers weights from all ranks, so a rank with
            # fewer evaluation batches repeats its last forward (unscored) until all are done.
            sharded = fsdp_of(model) is not None
            missing = max(self.cluster.gather(len(self.eval_data))) if sharded else 0
            for inputs, targets in self.eval_data.batches(0):
                missing -= 1
                s.eval_inputs = inputs.to(s.device, non_blocking=True)
                self._event(Event.EVAL_BEFORE_FORWARD)
                s.eval_outputs = model(s.eval_inputs)
                self._event(Event.EVAL_AFTER_FORWARD)
                targets = targets.to(s.device, non_blocking=True)
                logits = s.eval_outputs.float()
                sums[0] += (logits.argmax(dim=1) == targets).sum()
                sums[1] += len(targets)
                sums[2] += F.cross_entropy(logits, targets, reduction="sum")
            for _ in range(missing if s.eval_inputs is not None else 0):
                model(s.eval_inputs)
        sums[3] += s.epoch_loss_sum
        sums[4] += s.epoch_loss_count
        correct, seen, loss_sum, train_sum, train_count = self.cluster.sum(sums).tolist()
        s.eval_inputs = s.eval_outputs = None
        model.train(was_training)
        train_loss = train_sum / max(1.0, train_count)
        if not math.isfinite(train_loss):
            raise TrainingError(
                f"training diverged: the train loss is {train_loss} in epoch {s.epoch}",
                hint="lower the learning rate (--set lr=...) or add warmup",
            )
        s.metrics = {
            "train_loss": train_loss,
            "test_loss": loss_sum / max(1.0, seen),
            "test_acc": correct / max(1.0, seen),
            "lr": float(s.optimizer.param_groups[0]["lr"]),
            "elapsed_s": round(s.train_seconds, 3),
        }
        self._event(Event.EVAL_END)
        return s.metrics

    # ----------------------------------------------------------- checkpoints
    def save_checkpoint(self) -> Path | None:
        """Write a checkpoint (rank 0); every rank must call this at the same step."""
        s = self.state
        if self.checkpointer is None:
            return None
        self._event(Event.CHECKPOINT)
        # What differs between ranks: their random streams and their share of the epoch's loss.
        ranks = self.cluster.gather(
            {
                "rng": rng_state(),
                "epoch_loss_sum": float(s.epoch_loss_sum),
                "epoch_loss_count": s.epoch_loss_count,
            }
        )
        self._saved_step = s.step
        # Under FSDP every rank helps gather each tensor whole, so the checkpoint is the one a
        # run without FSDP writes and resumes on any number of processes.
        model_state = full_model_state(unwrap_model(s.model))
        optimizer_state = full_optimizer_state(s.optimizer)
        if not s.is_main:
            return None
        payload = {
            "config": self.config,
            "world_size": s.world_size,
            "model": model_state,
            "optimizer": optimizer_state,
            "algorithms": self.engine.state_dict(),
            "trace": self.engine.trace_state(),
            "position": s.position(),
            "train": {"train_seconds": s.train_seconds, "metrics": s.metrics},
            "ranks": ranks,
        }
        return self.checkpointer.save(payload, s.step)

    def _load_latest(self) -> LoadedCheckpoint | None:
        """Rank 0 reads the newest readable checkpoint and hands it to every rank."""
        assert self.checkpointer is not None
        outcome: Any = None
        if self.cluster.is_main:
            try:
                outcome = self.checkpointer.load_latest(map_location="cpu")
            except TrainingError as exc:
                if not self.cluster.distributed:
                    raise
                outcome = ("error", exc.message, exc.hint)
        outcome = self.cluster.broadcast_from_main(outcome)
        if isinstance(outcome, tuple):
            raise TrainingError(outcome[1], hint=outcome[2])
        return outcome

    def _resume(self) -> None:
        if self.checkpointer is None:
            return
        loaded = self._load_latest()
        if loaded is None:
            return
        s = self.state
        if loaded.fell_back_from is not None and s.is_main:
            log.warning(
                "newest checkpoint %s is damaged; resuming from %s",
                loaded.fell_back_from.name,
                loaded.path.name,
            )
            print(
                f"checkpoint {loaded.fell_back_from.name} is damaged; "
                f"resuming from the previous one, {loaded.path.name}",
                flush=True,
            )
        p = loaded.payload
        self._check_compatible(p, loaded.path)
        try:
            load_full_model_state(unwrap_model(s.model), p["model"])
        except RuntimeError as exc:
            raise TrainingError(
                f"checkpoint {loaded.path} holds a model of another shape: {_first_problem(exc)}",
                hint="use the recipe and methods it was written with, or a fresh --run-dir",
            ) from exc
        try:
            load_full_optimizer_state(s.optimizer, p["optimizer"])
        except ValueError as exc:
            raise TrainingError(
                f"checkpoint {loaded.path} holds optimizer state for other parameters ({exc})",
                hint="use the recipe and methods it was written with, or a fresh --run-dir",
            ) from exc
        self.engine.load_state_dict(p["algorithms"])
        self.engine.load_trace_state(p["trace"])
        pos = p["position"]
        s.epoch, s.step, s.batch_index = pos["epoch"], pos["step"], pos["batch_index"]
        s.train_seconds = p["train"]["train_seconds"]
        s.metrics = dict(p["train"]["metrics"])
        self._restore_rank_state(p["ranks"])
        self._saved_step = s.step
        self.resumed_from = loaded.path

    def _restore_rank_state(self, ranks: list[dict[str, Any]]) -> None:
        """This rank's random streams and loss sums from the checkpoint's ranks.

        On the world size that wrote it, each rank takes its own. On another, the steps and
        their batches are the same (the global batch is the contract) but the random streams
        cannot be: rank r takes rank r's streams where there was one and a fresh seed where
        not, and rank 0 carries the epoch's whole loss sum so the epoch's mean stays exact.
        """
        s = self.state
        mine: dict[str, Any] | None
        if len(ranks) == s.world_size:
            mine = ranks[s.rank]
            loss_sum, loss_count = mine["epoch_loss_sum"], mine["epoch_loss_count"]
        else:
            first = s.rank == 0
            loss_sum = math.fsum(r["epoch_loss_sum"] for r in ranks) if first else 0.0
            loss_count = sum(r["epoch_loss_count"] for r in ranks) if first else 0
            mine = ranks[s.rank] if s.rank < len(ranks) else None
        s.epoch_loss_sum = torch.tensor(loss_sum, dtype=torch.float64, device=s.device)
        s.epoch_loss_count = loss_count
        if mine is not None:
            set_rng_state(mine["rng"])
        else:
            torch.manual_seed(s.step * 1_000_003 + s.rank)
        if len(ranks) != s.world_size and s.is_main:
            print(
                f"resuming on {s.world_size} process(es) a run checkpointed on {len(ranks)}: "
                f"{self.train_data.plan.describe()}",
                flush=True,
            )

    def _check_compatible(self, payload: dict[str, Any], path: Path) -> None:
        theirs_cfg = payload.get("config", {})
        theirs = theirs_cfg.get("recipe")
        ours = self.config.get("recipe")
        if theirs is not None and ours is not None and theirs != ours:
            raise TrainingError(
                f"checkpoint {path} was written by recipe '{theirs}', not '{ours}'",
                hint="use a fresh --run-dir for a different recipe",
            )
        changed = _changed_keys(theirs_cfg.get("resolved"), self.config.get("resolved"))
        if changed and self.state.is_main:
            print(f"resuming with changed settings: {', '.join(changed)}", flush=True)


def _first_problem(exc: RuntimeError) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[1] if len(lines) > 1 else lines[0] if lines else "state_dict mismatch"


def _changed_keys(before: Any, after: Any, prefix: str = "") -> list[str]:
    if not isinstance(before, dict) or not isinstance(after, dict):
        return [] if before == after else [f"{prefix or 'value'} ({before!r} -> {after!r})"]
    out = []
    for key in sorted(set(before) | set(after)):
        name = f"{prefix}.{key}" if prefix else str(key)
        if key not in before or key not in after:
            out.append(f"{name} ({before.get(key)!r} -> {after.get(key)!r})")
        elif before[key] != after[key]:
            out.extend(_changed_keys(before[key], after[key], name))
    return out
