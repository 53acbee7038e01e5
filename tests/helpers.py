"""Small helpers for tests: the wait lives in the lab's harness (spotlab/harness.py), which the
benches share."""

from __future__ import annotations

from spotlab.harness import WAIT_SCALE, wait_for

__all__ = ["WAIT_SCALE", "wait_for"]
