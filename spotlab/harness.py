"""The harness that drives the real spotrun CLI against the lab: an isolated SPOTRUN_HOME and
tmux server (`Env`), and the one way a test or a bench waits (`wait_for`, stretched by
WAIT_SCALE). It lives in the lab, not in the test suite, so the lab, the tests and the benches
all import it from here and the lab imports nothing of the tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger

REPO = Path(__file__).resolve().parent.parent

# A bound is how long a test waits before calling a thing missing, not how long the thing may
# take: on a loaded 2-core machine (load 6-8) lab steps take 3-5x their quiet time, so every
# bound is stretched by this factor (SPOTRUN_TEST_WAIT_SCALE, default 3). A passing test never
# waits longer for it; only a real failure is reported later.
WAIT_SCALE = float(os.environ.get("SPOTRUN_TEST_WAIT_SCALE", "3"))


def wait_for(
    predicate: Any, timeout: float = 60.0, what: str = "condition", *, interval: float = 0.2
) -> Any:
    """Poll until predicate() is truthy and return its value; fail after timeout s (scaled)."""
    bound = timeout * WAIT_SCALE
    deadline = time.monotonic() + bound
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {bound:.0f}s waiting for {what}")
        time.sleep(interval)


@dataclass
class Env:
    home: Path
    tmux_dir: Path
    vars: dict[str, str]

    def cli(
        self, *args: str, timeout: float = 120, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run the real `spotrun` command line in a child process. `timeout` is stretched by
        WAIT_SCALE like every other bound: load changes the time, not the verdict."""
        proc = subprocess.run(
            [sys.executable, "-m", "spotrun", *args],
            capture_output=True,
            text=True,
            env=self.vars,
            timeout=timeout * WAIT_SCALE,
            cwd=REPO,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"spotrun {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def popen(self, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "spotrun", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.vars,
            cwd=REPO,
            **kwargs,
        )

    def runs(self) -> list[dict[str, Any]]:
        proc = self.cli("ls", "--all", "--json", check=True)
        return json.loads(proc.stdout)  # type: ignore[no-any-return]

    def run_state(self, run_id: str) -> str:
        """The run's state, read from the ledger in this process: what a wait polls (a CLI
        call is a spotrun process, ~0.4 CPU-s, each time)."""
        with Ledger(load_settings(self.home)) as ledger:
            return ledger.get_run(run_id).state.value

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", *args], capture_output=True, text=True, env=self.vars)

    def sessions(self) -> list[str]:
        proc = self.tmux("list-sessions", "-F", "#{session_name}")
        return proc.stdout.split() if proc.returncode == 0 else []
