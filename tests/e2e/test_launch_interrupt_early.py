"""Ctrl-C before `spotrun launch`'s own body begins (while Python imports the CLI): exit 130
with "interrupted: nothing was launched", no traceback, and nothing made (issue 38, point 7:
Ctrl-C always says what it left behind). The SIGINT is a real one, raised by the child itself
at the moment a given module is first imported, so the moment is exact on any machine."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, Env
from tests.helpers import WAIT_SCALE

CHILD = """
import builtins, signal, sys
module = sys.argv.pop(1)
real_import = builtins.__import__

def interrupting_import(name, *args, **kwargs):
    if name == module:
        builtins.__import__ = real_import
        signal.raise_signal(signal.SIGINT)  # Ctrl-C as this module is imported
    return real_import(name, *args, **kwargs)

builtins.__import__ = interrupting_import
from spotrun.cli.entry import main
main()
"""


@pytest.mark.parametrize("module", ["typer", "spotrun.cli.launch"])
def test_ctrl_c_while_the_cli_is_imported_says_nothing_was_launched(env: Env, module: str) -> None:
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
    assert not (env.home / "runs").exists() or not any((env.home / "runs").iterdir())
    assert env.runs() == [] and env.sessions() == []
