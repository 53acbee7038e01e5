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


def hardware_line(device: str = "cpu") -> str:
    """The device every figure was measured on, read now: CPU model, torch's vector ISA and the
    bf16 flags (or their absence), or a GPU's name and compute capability. Print it beside
    every figure: the same recipe runs 11x apart on CPUs with and without bf16 instructions."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from spotrun.train.device import detect_capabilities

    caps = detect_capabilities(device)
    if caps.kind == "cuda":
        return caps.line()
    wide = sorted(f for f in caps.cpu_flags if f.startswith(("avx512", "amx")) or f == "avx2")
    return f"{caps.line()}; {os.cpu_count()} logical CPUs; flags: {' '.join(wide) or 'none'}"
