"""Keys and values a generating model keeps, so each new token attends to the past without
computing it again (used only when generating: training never builds one)."""

from __future__ import annotations

import torch


class LayerCache:
    """One attention layer's keys and values (B, H, T, D) of the positions seen so far."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """How many positions are held: the next token's position."""
        return 0 if self.keys is None else self.keys.shape[-2]

    def extend(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The held keys and values with these new positions after them (and now held)."""
        if self.keys is not None and self.values is not None:
            keys = torch.cat((self.keys, keys), dim=-2)
            values = torch.cat((self.values, values), dim=-2)
        self.keys, self.values = keys, values
        return keys, values
