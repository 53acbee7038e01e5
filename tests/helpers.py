"""Small helpers for tests."""

from __future__ import annotations

import os
import time
from typing import Any

# A bound is how long a test waits before calling a thing missing, not how long the thing may
# take: on a loaded 2-core machine (load 6-8) lab steps take 3-5x their quiet time, so every
# bound is stretched by this factor (SPOTRUN_TEST_WAIT_SCALE, default 3). A passing test never
# waits longer for it; only a real failure is reported later.
WAIT_SCALE = float(os.environ.get("SPOTRUN_TEST_WAIT_SCALE", "3"))


def wait_for(
    predicate: Any, timeout: float = 60.0, what: str = "condition", *, interval: float = 0.2
) -> Any:
    """Poll until predicate() is truthy and return its value; fail the test after timeout s."""
    bound = timeout * WAIT_SCALE
    deadline = time.monotonic() + bound
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {bound:.0f}s waiting for {what}")
        time.sleep(interval)
