"""Run a probe script (the CLI's entry, then a look at sys.modules) in a fresh interpreter with
a test's environment: what a command loaded, as the probe's last line of JSON says."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from spotlab.harness import REPO, Env


def run_probe(env: Env, probe: str, *args: str) -> tuple[list[str], dict[str, Any]]:
    """The lines the command printed before the probe's, and the probe's JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", probe, *args],
        capture_output=True,
        text=True,
        env=env.vars,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    *said, last = proc.stdout.rstrip("\n").splitlines()
    found: dict[str, Any] = json.loads(last)
    return said, found
