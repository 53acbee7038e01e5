"""Ctrl-C while spotrun's very first modules load (the way in's own imports, before typer):
`spotrun launch` still says "interrupted: nothing was launched" and exits 130, with no
traceback. The SIGINT is real, raised by the child itself as the module is first imported
(tests/e2e/test_launch_interrupt_early.py's way), so the moment is exact on any machine."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, Env
from tests.e2e.test_launch_interrupt_early import CHILD
from tests.helpers import WAIT_SCALE


@pytest.mark.parametrize("module", ["spotrun.cli.common", "spotrun.core.home"])
def test_ctrl_c_while_the_way_in_loads_says_nothing_was_launched(env: Env, module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, module, "launch", "digits-fast", "--cloud", "local"],
        capture_output=True,
        text=True,
        env=env.vars,
        cwd=REPO,
        timeout=120 * WAIT_SCALE,
    )
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert proc.stderr.strip() == "interrupted: nothing was launched", proc.stderr
    assert env.runs() == [] and env.sessions() == []
