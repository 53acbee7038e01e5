"""A WAKE sent the moment the controller's lock names it must wake it, not kill it: SIGUSR1's
default action ends a process, so the handler has to be in place before the lock is taken."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spotrun.core.config import load_settings
from spotrun.drive.home import WAKE, running_pid
from tests.helpers import wait_for


def test_wake_as_soon_as_the_lock_names_the_controller(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "SPOTRUN_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "spotrun.drive.home_controller"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    settings = load_settings(home)
    # what `ensure_controller` does: once running_pid() answers, it sends WAKE at once
    pid = wait_for(
        lambda: running_pid(settings), 60, "the controller to take its lock", interval=0.001
    )
    assert pid == proc.pid
    for _ in range(20):
        os.kill(pid, WAKE)
    out, _ = proc.communicate(timeout=120)  # nothing live: it lingers, then exits by itself
    assert proc.returncode == 0, (proc.returncode, out)
    assert "nothing live: the controller exits" in out, out
