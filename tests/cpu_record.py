"""Each test's CPU time, with everything it started: where the suite's time goes (issue 37.7).

The suite is CPU-bound on a small machine, and most of its CPU is spent outside the pytest
process: the spotrun commands a test runs, the controllers and trainers they start, the lab's
hosts and the jobs on them. With SPOTRUN_TEST_CPU_LOG=FILE, each pytest process that runs tests
(every xdist worker) moves itself into a CPU-accounting cgroup of its own, which every process
it starts inherits (a daemonized tmux server and a lab host's PID namespace included), and
appends one line per test to FILE: `node id <TAB> CPU seconds <TAB> wall seconds`, its setup,
call and teardown together. A process a test leaves running is counted in the tests after it.

    SPOTRUN_TEST_CPU_LOG=/tmp/cpu.tsv .venv/bin/python -m pytest -n 3 --dist worksteal
    .venv/bin/python scripts/record_durations.py suite.log --cpu-log /tmp/cpu.tsv  # tests/cpu_seconds.json

Needs root and a cgroup v1 `cpuacct` hierarchy or cgroup v2; without them it says so once and
records nothing.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import pytest

CPU_LOG_VAR = "SPOTRUN_TEST_CPU_LOG"
CGROUP_V1 = Path("/sys/fs/cgroup/cpuacct")
CGROUP_V2 = Path("/sys/fs/cgroup")
GROUP_PREFIX = "spotrun-tests-"


@dataclass
class CpuGroup:
    """A cgroup this process moved itself into, and how to read its CPU time."""

    path: Path
    parent: Path
    v1: bool

    @classmethod
    def enter(cls, name: str) -> CpuGroup:
        if (CGROUP_V1 / "cpuacct.usage").exists():
            parent, v1 = CGROUP_V1, True
        elif (CGROUP_V2 / "cgroup.controllers").exists():
            parent, v1 = CGROUP_V2, False
        else:
            raise OSError("no cgroup v1 cpuacct hierarchy and no cgroup v2 at /sys/fs/cgroup")
        _remove_stale(parent)
        path = parent / name
        path.mkdir(exist_ok=True)
        (path / "cgroup.procs").write_text(str(os.getpid()))
        return cls(path, parent, v1)

    def cpu_seconds(self) -> float:
        if self.v1:
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, value = line.split()
            if key == "usage_usec":
                return int(value) / 1e6
        raise OSError(f"no usage_usec in {self.path / 'cpu.stat'}")

    def leave(self) -> None:
        """Back to the parent group; the group itself goes once nothing is left in it."""
        (self.parent / "cgroup.procs").write_text(str(os.getpid()))
        try:
            self.path.rmdir()
        except OSError as exc:  # processes a test left behind still run in it
            print(f"cpu_record: {self.path} kept: {exc}", file=sys.stderr)


def _remove_stale(parent: Path) -> None:
    """Groups an earlier run kept (a process it left was still running as it ended) go once
    their pytest process is gone and nothing runs in them."""
    for group in parent.glob(f"{GROUP_PREFIX}*"):
        pid = group.name.removeprefix(GROUP_PREFIX).split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            try:
                group.rmdir()
            except OSError:  # something still runs in it: kept for now
                continue


class CpuRecorder:
    """The pytest plugin: one line per test to the log, from this process's cgroup."""

    def __init__(self, log: Path, group: CpuGroup) -> None:
        self.log = log
        self.group = group

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        cpu, wall = self.group.cpu_seconds(), time.monotonic()
        yield
        used = self.group.cpu_seconds() - cpu
        line = f"{item.nodeid}\t{used:.2f}\t{time.monotonic() - wall:.2f}\n"
        with self.log.open("a") as out:  # one short append per test: workers' lines stay whole
            out.write(line)

    def pytest_unconfigure(self) -> None:
        self.group.leave()


def install(config: pytest.Config) -> None:
    """Register the recorder when SPOTRUN_TEST_CPU_LOG asks for it, in each process that runs
    tests (an xdist controller runs none)."""
    log = os.environ.get(CPU_LOG_VAR)
    is_xdist_controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(
        config, "workerinput"
    )
    if not log or is_xdist_controller or config.option.collectonly:
        return  # a process that runs no tests has no CPU to record
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    try:
        group = CpuGroup.enter(f"{GROUP_PREFIX}{os.getpid()}-{worker}")
    except OSError as exc:
        print(f"cpu_record: not recording CPU ({exc})", file=sys.stderr)
        return
    config.pluginmanager.register(CpuRecorder(Path(log), group), "spotrun-cpu-record")
