"""Language-model figures added to every evaluation of a text recipe.

The trainer's evaluation already gives next-token cross-entropy (`test_loss`, nats per token)
and next-token accuracy (`test_acc`); this adds perplexity and the loss per character, which
compares models across tokenisers (for char tokens the two losses are equal).
"""

from __future__ import annotations

import math

from spotrun.train.algorithm import AlgorithmBase
from spotrun.train.events import Event
from spotrun.train.state import State


def perplexity(nats_per_token: float) -> float:
    return math.exp(min(nats_per_token, 700.0))  # exp overflows a float past ~709


class TextMetrics(AlgorithmBase):
    name = "text_metrics"
    events = frozenset({Event.EVAL_END})

    def __init__(self, tokens_per_char: float) -> None:
        self.tokens_per_char = tokens_per_char

    def apply(self, event: Event, state: State) -> None:
        loss = state.metrics["test_loss"]
        state.metrics["test_perplexity"] = perplexity(loss)
        state.metrics["test_loss_per_char"] = loss * self.tokens_per_char
