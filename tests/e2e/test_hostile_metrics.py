"""A job's metrics lines are data (issue 38, point 6): a line of 100,000 `[` (RecursionError in
json) or a number of 5,000 digits is skipped and counted, and the run succeeds with the good
lines' metrics. The real CLI on the local cloud: the controller reads the file as it grows."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from spotrun.core.metrics_file import parse_line
from tests.conftest import Env

pytestmark = pytest.mark.slow

WRITER = """\
import os
path = os.path.join(os.environ["SPOTRUN_RUN_DIR"], "metrics.jsonl")
with open(path, "a") as out:
    out.write("[" * 100_000 + "]" * 100_000 + "\\n")
    out.write("7" * 5_000 + "\\n")
    out.write('{"epoch": 1, "acc": 0.5}\\n')
"""


def test_hostile_metrics_lines_are_skipped_and_counted(env: Env) -> None:
    cmd = f"{shlex.quote(sys.executable)} -c {shlex.quote(WRITER)}"
    proc = env.cli("launch", "--cmd", cmd, "--name", "hostile", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    status = json.loads(env.cli("status", "hostile", "--json", check=True).stdout)
    assert status["state"] == "succeeded", status
    assert status["metrics"] == {"epoch": 1, "acc": 0.5}, status
    skipped = [e["message"] for e in status["events"] if e["kind"] == "metrics"]
    assert skipped == ["skipped 2 lines of metrics.jsonl that are not one JSON object"], status


def test_a_metrics_line_is_one_object_or_nothing() -> None:
    assert parse_line(b'{"epoch": 2}') == {"epoch": 2}
    for bad in (b"[" * 100_000 + b"]" * 100_000, b"7" * 5_000, b"[1, 2]", b"{torn", b"\xff"):
        assert parse_line(bad) is None
