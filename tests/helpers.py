"""Small helpers for tests."""

from __future__ import annotations

import time
from typing import Any


def wait_for(
    predicate: Any, timeout: float = 60.0, what: str = "condition", *, interval: float = 0.2
) -> Any:
    """Poll until predicate() is truthy and return its value; fail the test after timeout s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
