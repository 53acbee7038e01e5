"""tests/cpu_record.py: a test's line holds the CPU of the processes it started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spotlab.harness import REPO
from tests.cpu_record import CGROUP_V1, CPU_LOG_VAR, GROUP_PREFIX

INNER = """
import subprocess, sys

BURN = "import time\\nwhile time.process_time() < 0.6: pass"


def test_burns_in_a_child():
    subprocess.run([sys.executable, "-c", BURN], check=True)


def test_idle():
    pass
"""


def test_each_test_line_counts_its_child_processes_cpu(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "conftest.py").write_text(
        "from tests.cpu_record import install\n\n\ndef pytest_configure(config):\n"
        "    install(config)\n"
    )
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    stale = CGROUP_V1 / f"{GROUP_PREFIX}{gone.pid}-gw9"  # kept by an earlier run, now empty
    stale.mkdir()
    log = tmp_path / "cpu.tsv"
    env = {**os.environ, CPU_LOG_VAR: str(log), "PYTHONPATH": str(REPO)}
    inner = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0", str(tmp_path)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *inner],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stdout + stderr
    lines = dict(
        (nodeid.split("::")[-1], (float(cpu), float(wall)))
        for nodeid, cpu, wall in (line.split("\t") for line in log.read_text().splitlines())
    )
    assert set(lines) == {"test_burns_in_a_child", "test_idle"}, lines
    burned, _ = lines["test_burns_in_a_child"]
    assert burned >= 0.6, lines  # the child's 0.6 s of CPU, and its start-up
    assert lines["test_idle"][0] < burned, lines
    # its own group only: the suite's other workers make and remove theirs meanwhile
    assert not list(CGROUP_V1.glob(f"{GROUP_PREFIX}{proc.pid}-*")), "its cgroup is removed"
    assert not stale.exists(), "an earlier run's empty group is removed"
