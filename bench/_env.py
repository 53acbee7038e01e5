"""Shared set-up for benchmarks: the same malloc settings for every side of a comparison."""

from __future__ import annotations

import os
import sys

# glibc otherwise hands large activation buffers back to the OS and asks again every step,
# which on this kind of machine costs more than the maths (see TESTING.md).
GLIBC_TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184"


def with_malloc_settings() -> None:
    """Re-run this process with GLIBC_TUNABLES set, if it is not set already."""
    if os.environ.get("GLIBC_TUNABLES") != GLIBC_TUNABLES:
        os.environ["GLIBC_TUNABLES"] = GLIBC_TUNABLES
        os.execv(sys.executable, [sys.executable, *sys.argv])
