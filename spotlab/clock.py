"""Clocks that disagree: a child process's wall clock offset from this machine's.

spotlab/clock_offset/sitecustomize.py shifts time.time() in every Python process started with
`offset_env(seconds)` in its environment (and in their children). On EC2 the laptop's clock and
an instance's can disagree by any amount; spotrun must only ever compare times taken on one
machine and hand durations across.

Not shifted: the monotonic clock (it has no frame to disagree in), and the times the kernel
keeps (file mtimes, `date`), which stay this machine's; a Python process that compares a file's
mtime with time.time() sees the offset between them too (on a real machine with a wrong clock
the two agree).
"""

from __future__ import annotations

import os
from pathlib import Path

SHIM_DIR = Path(__file__).parent / "clock_offset"
OFFSET_VAR = "SPOTLAB_CLOCK_OFFSET_S"


def offset_env(seconds: float, environ: dict[str, str]) -> dict[str, str]:
    """`environ` with its Python processes' wall clock `seconds` off (negative: behind)."""
    path = [str(SHIM_DIR), *filter(None, environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**environ, "PYTHONPATH": os.pathsep.join(path), OFFSET_VAR: str(seconds)}
