"""The trainer loop: short enough to read in one sitting, with exact resume built in.

Behaviour beyond the plain loop comes from algorithms (which may change the state at events)
and callbacks (which only observe). The trainer owns three things itself because a spot run
depends on them: checkpoints, resume, and stopping cleanly on a signal.
"""

from __future__ import annotations

import logging
import math
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from spotrun.errors import TrainingError
from spotrun.train.algorithm import Algorithm, Engine
from spotrun.train.callbacks import Callback
from spotrun.train.checkpoint import Checkpointer, rng_state, set_rng_state
from spotrun.train.data import BatchSource
from spotrun.train.events import Event
from spotrun.train.state import State

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
        train_data: BatchSource,
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
        self.state = State(
            model=model,
            optimizer=optimizer,
            loss_fn=loss_fn,
            max_epochs=max_epochs,
            steps_per_epoch=len(train_data),
            device=torch.device(device),
        )
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            self.state.rank = torch.distributed.get_rank()
            self.state.world_size = torch.distributed.get_world_size()
        self.train_data = train_data
        self.eval_data = eval_data
        self.engine = Engine(algorithms)
        self.callbacks = list(callbacks)
        self.checkpointer = Checkpointer(checkpoint_dir) if checkpoint_dir else None
        self.checkpoint_every_steps = checkpoint_every_steps
        self.eval_every_epochs = max(1, eval_every_epochs)
        self.config = config or {}
        self.resumed_from: Path | None = None

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
                if s.stop_requested:
                    return self._interrupt()
            self._event(Event.FIT_END)
            return FitResult(False, dict(s.metrics), s.step, s.epoch)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_stop_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.state.stop_signal = signum

    def _train_epoch(self) -> bool:
        """Train the rest of the current epoch; True if a stop was asked for mid-epoch."""
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
            if s.stop_requested:
                return True
        return False

    def _train_batch(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        s = self.state
        self._event(Event.BATCH_START)
        s.inputs = inputs.to(s.device, non_blocking=True)
        s.targets = targets.to(s.device, non_blocking=True)
        s.skip_step = False
        self._event(Event.AFTER_DATALOADER)
        self._event(Event.BEFORE_FORWARD)
        s.outputs = s.model(s.inputs)
        self._event(Event.AFTER_FORWARD)
        self._event(Event.BEFORE_LOSS)
        s.loss = s.loss_fn(s.outputs, s.targets)
        self._event(Event.AFTER_LOSS)
        if not s.skip_step:
            self._event(Event.BEFORE_BACKWARD)
            s.optimizer.zero_grad(set_to_none=True)
            s.loss.backward()
            self._event(Event.AFTER_BACKWARD)
            self._event(Event.BEFORE_OPTIMIZER_STEP)
            s.optimizer.step()
            self._event(Event.AFTER_OPTIMIZER_STEP)
        s.epoch_loss_sum += s.loss.detach().to(torch.float64)
        s.epoch_loss_count += 1
        s.step += 1
        s.batch_index += 1
        self._event(Event.BATCH_END)
        s.inputs = s.targets = s.outputs = s.loss = None

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
        if self.checkpointer is not None:
            self.save_checkpoint()
        return FitResult(True, dict(s.metrics), s.step, s.epoch)

    # -------------------------------------------------------------- evaluate
    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        s = self.state
        self._event(Event.EVAL_START)
        model = s.eval_model if s.eval_model is not None else s.model
        was_training = model.training
        model.eval()
        correct = total = 0
        loss_sum = 0.0
        if self.eval_data is not None:
            for inputs, targets in self.eval_data.batches(0):
                s.eval_inputs = inputs.to(s.device)
                self._event(Event.EVAL_BEFORE_FORWARD)
                s.eval_outputs = model(s.eval_inputs)
                self._event(Event.EVAL_AFTER_FORWARD)
                targets = targets.to(s.device)
                loss_sum += float(F.cross_entropy(s.eval_outputs.float(), targets, reduction="sum"))
                correct += int((s.eval_outputs.argmax(dim=1) == targets).sum())
                total += len(targets)
        correct, total, loss_sum = self._all_reduce(correct, total, loss_sum)
        s.eval_inputs = s.eval_outputs = None
        model.train(was_training)
        train_loss = float(s.epoch_loss_sum) / max(1, s.epoch_loss_count)
        if not math.isfinite(train_loss):
            raise TrainingError(
                f"training diverged: the train loss is {train_loss} in epoch {s.epoch}",
                hint="lower the learning rate (--set lr=...) or add warmup",
            )
        s.metrics = {
            "train_loss": train_loss,
            "test_loss": loss_sum / max(1, total),
            "test_acc": correct / max(1, total),
            "lr": float(s.optimizer.param_groups[0]["lr"]),
            "elapsed_s": round(s.train_seconds, 3),
        }
        self._event(Event.EVAL_END)
        return s.metrics

    def _all_reduce(self, correct: int, total: int, loss_sum: float) -> tuple[int, int, float]:
        if self.state.world_size == 1:
            return correct, total, loss_sum
        t = torch.tensor([correct, total, loss_sum], dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return int(t[0]), int(t[1]), float(t[2])

    # ----------------------------------------------------------- checkpoints
    def _bare_model(self) -> nn.Module:
        model = self.state.model
        return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model

    def save_checkpoint(self) -> Path | None:
        s = self.state
        self._event(Event.CHECKPOINT)
        if self.checkpointer is None or not s.is_main:
            return None
        payload = {
            "config": self.config,
            "model": self._bare_model().state_dict(),
            "optimizer": s.optimizer.state_dict(),
            "algorithms": self.engine.state_dict(),
            "position": s.position(),
            "train": {
                "epoch_loss_sum": float(s.epoch_loss_sum),
                "epoch_loss_count": s.epoch_loss_count,
                "train_seconds": s.train_seconds,
                "metrics": s.metrics,
            },
            "rng": rng_state(),
        }
        return self.checkpointer.save(payload, s.step)

    def _resume(self) -> None:
        if self.checkpointer is None:
            return
        loaded = self.checkpointer.load_latest(map_location=self.state.device)
        if loaded is None:
            return
        if loaded.fell_back_from is not None:
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
            self._bare_model().load_state_dict(p["model"])
        except RuntimeError as exc:
            raise TrainingError(
                f"checkpoint {loaded.path} holds a model of another shape: "
                f"{str(exc).splitlines()[-1].strip()}",
                hint="start in a fresh --run-dir",
            ) from exc
        self.state.optimizer.load_state_dict(p["optimizer"])
        self.engine.load_state_dict(p["algorithms"])
        pos = p["position"]
        s = self.state
        s.epoch, s.step, s.batch_index = pos["epoch"], pos["step"], pos["batch_index"]
        train = p["train"]
        s.epoch_loss_sum = torch.tensor(
            train["epoch_loss_sum"], dtype=torch.float64, device=s.device
        )
        s.epoch_loss_count = train["epoch_loss_count"]
        s.train_seconds = train["train_seconds"]
        s.metrics = dict(train["metrics"])
        set_rng_state(p["rng"])
        self.resumed_from = loaded.path

    def _check_compatible(self, payload: dict[str, Any], path: Path) -> None:
        theirs = payload.get("config", {}).get("recipe")
        ours = self.config.get("recipe")
        if theirs is not None and ours is not None and theirs != ours:
            raise TrainingError(
                f"checkpoint {path} was written by recipe '{theirs}', not '{ours}'",
                hint="use a fresh --run-dir for a different recipe",
            )
