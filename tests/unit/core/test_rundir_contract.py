"""The run folder's names and the SPOTRUN_* variables are written in spotrun/core/rundir.py only.

Every other module imports them, so a file the job writes and the controller reads cannot be
spelled two ways. This scans the source of spotrun/ (string literals, f-strings' text included;
docstrings and comments are prose and may name them) and fails on a copy of a name.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from spotrun.core import rundir
from tests.conftest import REPO
from tests.source_scan import docstring_ids

SOURCE = REPO / "spotrun"
CONTRACT = SOURCE / "core" / "rundir.py"


def _names(suffix: str) -> dict[str, str]:
    return {
        attr: value
        for attr, value in vars(rundir).items()
        if attr.endswith(suffix) and isinstance(value, str)
    }


FILES = _names("_FILE")
FOLDERS = _names("_DIR")
VARIABLES = _names("_VAR")
# A file's or a variable's name anywhere in a literal ("job.log", f"{run_dir}/exit.json", a
# message that names one). A folder's name is a plain word too ("nodes" is also a resource, "exec"
# a command), so only where it is a path: beside a slash ("checkpoints/"), joined onto a path
# (`run_dir / "nodes"`, `posixpath.join(run_dir, "workdir")`), or made a constant of its own.
FILE_PATTERN = re.compile(
    r"(?<![\w.-])(" + "|".join(re.escape(n) for n in FILES.values()) + r")(?![\w.-])"
)
FOLDER_WORDS = "|".join(re.escape(n) for n in FOLDERS.values())
FOLDER_IN_PATH = re.compile(rf"(?<![\w.-])({FOLDER_WORDS})/|/({FOLDER_WORDS})(?![\w.-])")
VARIABLE_PATTERN = re.compile(r"(?<!\w)_?SPOTRUN_[A-Z0-9_]*[A-Z0-9](?!\w)")
# The same word for another folder than the run folder's: (module, literal) and what it is.
OTHER_FOLDERS = {
    (
        "spotrun/remote_controller/forward.py",
        "/workdir",
    ): "a launch's workdir staged on the controller host",
}


def _folder_places(tree: ast.AST) -> set[int]:
    """The ids of the literals that stand where a path's part does: the right of `/`, an
    argument of a `join(...)`, the value of an UPPER_CASE constant."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            found.add(id(node.right))
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if name == "join":
                found.update(id(arg) for arg in node.args)
        elif isinstance(node, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id.isupper() for t in node.targets
        ):
            found.add(id(node.value))
    return found


def copies_in(path: Path) -> list[str]:
    """`line: literal` for each string literal of `path` that copies a contract name."""
    tree = ast.parse(path.read_text(), str(path))
    skip = docstring_ids(tree)
    path_parts = _folder_places(tree)
    folders = set(FOLDERS.values())
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in skip:
            continue
        where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
        text = node.value
        copied = (
            FILE_PATTERN.search(text)
            or FOLDER_IN_PATH.search(text)
            or (text in folders and id(node) in path_parts)
            or VARIABLE_PATTERN.search(text)
            or text == rundir.RESERVED_VAR_PREFIX
        )
        if copied and (str(where), text) not in OTHER_FOLDERS:
            found.append(f"{where}:{node.lineno}: {text!r}")
    return found


def test_the_contract_names_what_it_should() -> None:
    # the scan is only as good as its lists: spot-check that each kind of name is in them
    assert {"job.log", "exit.json", "supervisor.log", "metrics.jsonl"} <= set(FILES.values())
    assert {"checkpoints", "nodes", "workdir"} <= set(FOLDERS.values())
    assert {"SPOTRUN_HOME", "SPOTRUN_RUN_DIR", "_SPOTRUN_COMPLETE"} <= set(VARIABLES.values())
    # one name per file: no two constants for the same file, no name used for two files
    assert len(set(FILES.values())) == len(FILES)
    assert len(set(VARIABLES.values())) == len(VARIABLES)


def test_the_scan_finds_a_copy(tmp_path: Path) -> None:
    # a test that cannot fail is a defect: each kind of copy is caught, prose is not
    sample = tmp_path / "probe.py"
    sample.write_text(
        '"""Docstrings may say job.log and SPOTRUN_HOME."""\n'
        "import os\n"
        'a = "job.log"\n'
        'b = f"{os.sep}/exit.json"\n'
        'c = os.environ.get("SPOTRUN_RUN_ID")\n'
        'd = f"cd x; SPOTRUN_HOME={a} spotrun ls"\n'
        'e = "checkpoints/"\n'
        'f = "no checkpoints yet"  # prose: the plain word\n'
        'g = "SPOTRUN_"\n'
        'h = {"nodes": 2}  # a resource, not the folder\n'
        'i = os.path.join(a, "nodes")\n'
        'NODES = "nodes"\n'
        'j = f"set SPOTRUN_HOME to a folder you can write"\n'
    )
    found = copies_in(sample)
    lines = sorted(int(f.split(":")[1]) for f in found)
    assert lines == [3, 4, 5, 6, 7, 9, 11, 12, 13], found


def test_no_module_but_rundir_writes_a_contract_name() -> None:
    copies = [
        copy
        for path in sorted(SOURCE.rglob("*.py"))
        if path != CONTRACT
        for copy in copies_in(path)
    ]
    assert not copies, "import these names from spotrun.core.rundir:\n" + "\n".join(copies)
