"""How many CPU cores are free right now, for the local cloud's choice of training threads.

The local cloud's "instance" is a machine shared with everything else the user runs. PyTorch's
CPU kernels split each operation across their threads and wait for the slowest; a thread that
shares a core with another busy process holds the whole step back, so two threads on two cores
of which one is busy train slower than one thread alone (issue 21 measured 15.7 s against
8.5 s for digits-fast). So the trainer gets one thread per core that is free:

- the cores this process may run on: os.sched_getaffinity (a taskset or container cpuset), cut
  to the cgroup's CPU quota (cpu.max) when one is set;
- how busy they are now: two reads of /proc/stat SAMPLE_S apart give each core's busy share of
  that window, summed over the allowed cores. The load average reacts over a minute and counts
  processes waiting on disk, so it is used only where /proc/stat cannot be read.

free = allowed - busy, rounded to the nearest core, at least 1.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SAMPLE_S = 0.5
PROC_STAT = Path("/proc/stat")
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


@dataclass(frozen=True)
class FreeCores:
    allowed: int  # cores this process may use (affinity, cgroup quota)
    busy: float  # cores' worth of other work running now
    source: str  # where `busy` came from

    @property
    def free(self) -> int:
        return max(1, min(self.allowed, math.floor(self.allowed - self.busy + 0.5)))

    def describe(self) -> str:
        return (
            f"{self.free} of {self.allowed} cores free "
            f"({self.busy:.1f} busy with other work, from {self.source})"
        )


def allowed_cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))


def cgroup_quota(path: Path = CGROUP_CPU_MAX) -> float | None:
    """Cores' worth of CPU time the cgroup may use, or None when unlimited or unknown."""
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def cpu_times(text: str) -> dict[int, tuple[int, int]]:
    """(busy, total) jiffies per core from /proc/stat's `cpuN` lines; idle and iowait count
    as not busy, guest time is already inside user time."""
    times = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu":
            continue
        values = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
        idle = values[3] + values[4]
        total = sum(values)
        times[int(name[3:])] = (total - idle, total)
    return times


def busy_between(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], cores: list[int]
) -> float:
    busy = 0.0
    for core in cores:
        if core not in before or core not in after:
            continue
        worked = after[core][0] - before[core][0]
        elapsed = after[core][1] - before[core][1]
        if elapsed > 0:
            busy += min(1.0, max(0.0, worked / elapsed))
    return busy


def free_cores(
    sample_s: float = SAMPLE_S, sleep: Callable[[float], None] = time.sleep
) -> FreeCores:
    cores = allowed_cores()
    allowed = len(cores)
    quota = cgroup_quota()
    if quota is not None:
        allowed = max(1, min(allowed, math.floor(quota)))
    try:
        before = cpu_times(PROC_STAT.read_text())
        sleep(sample_s)
        after = cpu_times(PROC_STAT.read_text())
    except (OSError, ValueError):
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        return FreeCores(allowed, min(float(allowed), load), "the 1-minute load average")
    busy = busy_between(before, after, cores)
    return FreeCores(allowed, busy, f"/proc/stat over {sample_s:g} s")
