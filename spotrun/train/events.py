"""The points in training where algorithms and callbacks run."""

from __future__ import annotations

from enum import Enum


class Event(str, Enum):
    # Once, when the trainer is built: model surgery (BlurPool, concat pooling, a whitening
    # stem, channels_last, ...) and optimizer regrouping, before any checkpoint loads.
    INIT = "init"
    FIT_START = "fit_start"
    EPOCH_START = "epoch_start"
    BATCH_START = "batch_start"
    AFTER_DATALOADER = "after_dataloader"
    BEFORE_FORWARD = "before_forward"
    AFTER_FORWARD = "after_forward"
    BEFORE_LOSS = "before_loss"
    AFTER_LOSS = "after_loss"
    BEFORE_BACKWARD = "before_backward"
    AFTER_BACKWARD = "after_backward"
    BEFORE_OPTIMIZER_STEP = "before_optimizer_step"
    AFTER_OPTIMIZER_STEP = "after_optimizer_step"
    BATCH_END = "batch_end"
    EPOCH_END = "epoch_end"
    EVAL_START = "eval_start"
    EVAL_BEFORE_FORWARD = "eval_before_forward"
    EVAL_AFTER_FORWARD = "eval_after_forward"
    EVAL_END = "eval_end"
    CHECKPOINT = "checkpoint"  # just before a checkpoint is written: flush state into it
    INTERRUPT = "interrupt"  # a stop was asked for (SIGTERM, SIGUSR1, a spot notice)
    FIT_END = "fit_end"

    @property
    def is_after(self) -> bool:
        """After-events run algorithms in reverse order, so pairs nest like brackets."""
        return self in AFTER_EVENTS

    def __str__(self) -> str:
        return self.value


# The events that close a bracket opened by a before-event or a start-event; computed once,
# since the engine asks for every event of every step. after_dataloader closes nothing (there is
# no before_dataloader): it is where the batch pipeline starts (resize, select, mix, cut,
# convert), which runs in catalog order like any other before-event.
AFTER_EVENTS = frozenset(
    e
    for e in Event
    if (e.value.startswith(("after_", "eval_after_")) or e.value.endswith("_end"))
    and e is not Event.AFTER_DATALOADER
)
