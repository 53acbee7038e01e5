"""A home controller started beside a running one (two commands a moment apart each find no
controller yet: a launch's, then an `ls`'s) leaves at once: it tries the home's lock before it
loads the settings (pydantic) or the run machinery, so the loser costs a bare interpreter, not
a whole controller's imports. Read back from the real process which modules it loaded: a
timing assertion would only be noise on a shared machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from spotlab.harness import REPO
from spotrun.core.locks import try_lock
from spotrun.drive.home import CONTROLLER_LOCK_FILE
from tests.helpers import WAIT_SCALE

# What a controller that drives something needs, and the one that loses the lock must not load.
HEAVY = ("pydantic", "spotrun.core.config", "spotrun.store.ledger", "spotrun.control.controller")

# `python -m spotrun.drive.home_controller`, saying at its exit which of HEAVY it had loaded.
PROBE = f"""
import atexit, json, runpy, sys
def said():
    print("LOADED " + json.dumps(sorted(set({HEAVY!r}) & set(sys.modules))), file=sys.stderr)
atexit.register(said)
sys.argv = ["spotrun.drive.home_controller"]
runpy.run_module("spotrun.drive.home_controller", run_name="__main__", alter_sys=True)
"""


def test_a_controller_that_finds_the_home_taken_leaves_before_its_heavy_imports(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    held = try_lock(home / CONTROLLER_LOCK_FILE)  # the running controller's lock, really held
    assert held is not None
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE],
            env={**os.environ, "SPOTRUN_HOME": str(home)},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120 * WAIT_SCALE,
        )
    finally:
        held.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "another controller holds" in done.stdout, done.stdout
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED "))
    assert json.loads(line.removeprefix("LOADED ")) == []
