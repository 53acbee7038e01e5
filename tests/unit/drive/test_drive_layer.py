"""The driving processes are drive/'s alone: no layer below it starts or names one by its module
(an arrow import-linter cannot see), and a lookup by command line knows an older spotrun's
names as well as today's."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

from spotrun.drive.driver_process import DRIVER_MODULES, is_driver
from tests.conftest import REPO
from tests.source_scan import docstring_ids

SOURCE = REPO / "spotrun"
# The layers below drive (.importlinter's order); the layers above may start a driver.
BELOW_DRIVE = (
    "sweep",
    "control",
    "notify",
    "launch",
    "cost",
    "store",
    "cloud",
    "remote",
    "agent",
    "jobs",
    "datasets",
    "core",
)
DRIVE_NAMES = ("spotrun.drive", *DRIVER_MODULES)


def drive_names_in(folder: Path) -> list[str]:
    """`file:line: literal` for each string literal under `folder` (docstrings are prose) that
    names a drive module: a process started by its name from a layer that cannot import it."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        prose = docstring_ids(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                continue
            if id(node) not in prose and any(name in node.value for name in DRIVE_NAMES):
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    return found


def test_no_layer_below_drive_names_a_driving_process() -> None:
    found = [hit for layer in BELOW_DRIVE for hit in drive_names_in(SOURCE / layer)]
    assert found == []


def test_the_scan_finds_a_module_started_by_name(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(
        '"""Prose may say spotrun.drive.home_controller."""\n'
        'MODULE = "spotrun.sweep.home_controller"\n'
        'argv = ["python", "-m", "spotrun.drive.run_supervisor"]\n'
        'other = "spotrun.sweep.packs"\n'
    )
    lines = [hit.split(":")[1] for hit in drive_names_in(tmp_path)]
    assert lines == ["2", "3"]


def test_a_driver_is_known_by_its_old_name_and_its_new_one() -> None:
    python = sys.executable
    for module in (
        "spotrun.drive.home_controller",
        "spotrun.drive.run_supervisor",
        "spotrun.sweep.home_controller",  # started by an older spotrun, still driving
        "spotrun.sweep.run_supervisor",
        "spotrun.sweep.supervisor",
    ):
        assert is_driver([python, "-m", module, "run-1"]), module
    assert not is_driver([python, "-m", "spotrun", "ls"])
    assert not is_driver([python, "-m", "spotrun.drive.run_supervisorx"])
    assert not is_driver(["vim", "spotrun.drive.home_controller"])  # a name, not `-m` it


def test_each_driver_module_of_today_can_be_run() -> None:
    # `python -m` of today's names must find a module (an old name is only looked for)
    today = [m for m in DRIVER_MODULES if m.startswith("spotrun.drive.")]
    assert len(today) == 2 and all(importlib.util.find_spec(m) for m in today)
