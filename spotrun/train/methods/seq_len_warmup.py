"""Sequence-length warmup (Li et al., 2022; Composer's SeqLengthWarmup).

Early in training a language model learns mostly short-range statistics, which short windows
teach as well as long ones at a fraction of the compute (attention is quadratic in length):
train on the first L tokens of each window, L growing linearly to the full block_size.
"""

from __future__ import annotations

import torch

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.methods.options import SeqLenWarmupOptions
from spotrun.train.state import State


def warmup_seq_len(
    progress: float, full: int, *, min_len: int, duration_frac: float, multiple: int
) -> int:
    """The length at `progress` (0..1): min_len rising linearly to `full` at duration_frac,
    rounded down to a multiple of `multiple` (few distinct shapes), never below min_len."""
    if progress >= duration_frac:
        return full
    length = min_len + (full - min_len) * progress / duration_frac
    return max(min(min_len, full), min(full, int(length) // multiple * multiple))


def truncate_sequences(
    inputs: torch.Tensor, targets: torch.Tensor, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `length` tokens of each (B, T) input row and of its flattened (B*T,) targets."""
    b, t = inputs.shape
    if length >= t:
        return inputs, targets
    return inputs[:, :length], targets.view(b, t)[:, :length].reshape(-1)


class SeqLenWarmup(AlgorithmBase):
    name = "seq_len_warmup"
    events = frozenset({Event.AFTER_DATALOADER})

    def __init__(self, options: SeqLenWarmupOptions) -> None:
        self.options = options

    def apply(self, event: Event, state: State) -> None:
        assert state.inputs is not None and state.targets is not None
        if state.progress >= self.options.duration_frac:
            return
        length = warmup_seq_len(
            state.progress,
            state.inputs.shape[1],
            min_len=self.options.min_len,
            duration_frac=self.options.duration_frac,
            multiple=self.options.multiple,
        )
        state.inputs, state.targets = truncate_sequences(state.inputs, state.targets, length)
