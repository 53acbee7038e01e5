"""A process whose wall clock is off: SPOTLAB_CLOCK_OFFSET_S seconds added to time.time().

The lab's stand-in for a machine whose clock disagrees with the others' (a laptop hours off, an
instance set wrong), without touching this machine's clock, which every process shares. Put
this folder on PYTHONPATH with the variable set: Python imports `sitecustomize` at start-up,
and every process started from there (the CLI's supervisor, the host's agent) inherits both.
The monotonic clock is left as it is: it has no frame to disagree in.
"""

from __future__ import annotations

import os
import time

_offset_s = float(os.environ.get("SPOTLAB_CLOCK_OFFSET_S") or 0.0)
if _offset_s:
    _true_time, _true_time_ns = time.time, time.time_ns
    time.time = lambda: _true_time() + _offset_s
    time.time_ns = lambda: _true_time_ns() + int(_offset_s * 1e9)
