"""Free cores: /proc/stat arithmetic on real readings of this machine, and the rounding rule."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spotrun.cloud.free_cores import FreeCores, busy_between, cgroup_quota, cpu_times, free_cores


def test_free_is_allowed_minus_busy_rounded_and_at_least_one() -> None:
    assert FreeCores(2, 0.1, "x").free == 2
    assert FreeCores(2, 0.6, "x").free == 1  # most of a core taken: do not share it
    assert FreeCores(2, 1.0, "x").free == 1
    assert FreeCores(2, 7.5, "x").free == 1  # never zero threads
    assert FreeCores(8, 2.4, "x").free == 6
    assert "1 of 2 cores free (1.0 busy" in FreeCores(2, 1.0, "/proc/stat").describe()


def test_a_pinned_busy_loop_shows_as_a_busy_core_in_real_proc_stat() -> None:
    core = sorted(os.sched_getaffinity(0))[0]
    loop = subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c", "while True: pass"])
    try:
        before = cpu_times(Path("/proc/stat").read_text())
        subprocess.run([sys.executable, "-c", "import time; time.sleep(1.0)"], check=True)
        after = cpu_times(Path("/proc/stat").read_text())
    finally:
        loop.kill()
        loop.wait()
    assert core in before and set(before) == set(after)
    # the loop had that core for most of the second (other work can only add to it)
    assert busy_between(before, after, [core]) > 0.5


def test_cgroup_quota_reads_cpu_max(tmp_path: Path) -> None:
    path = tmp_path / "cpu.max"
    path.write_text("150000 100000\n")
    assert cgroup_quota(path) == 1.5
    path.write_text("max 100000\n")
    assert cgroup_quota(path) is None
    assert cgroup_quota(tmp_path / "absent") is None


def test_free_cores_counts_only_allowed_cores() -> None:
    found = free_cores(sample_s=0.2)
    assert found.allowed <= len(os.sched_getaffinity(0))
    assert 1 <= found.free <= found.allowed and found.source == "/proc/stat over 0.2 s"
