"""An import inside a function says why it is late (issue 17: function-level imports remain only
for heavy or optional dependencies, each with a one-line reason).

The reason is a comment on the import's own line, or a comment line just above its group (the
imports that follow each other in the same block; a comment line above one of them, after a
blank line, covers it and the ones after it), e.g.

    # late: pydantic (~0.1 s) stays off --help and ls
    from spotrun.jobs.taskfile import load_task

A bare `# type: ignore[...]`, `# noqa` or `# pragma` is no reason. Cheap imports belong at the
module's top; this test names file:line for each late import that gives no reason.

Late imports of spotrun's own modules are counted too (issue 37.5): the CLI's commands are lazy
(spotrun/cli/typer_app.py LazyCommand) and a module that keeps something heavy off a path
names it at its top with spotrun/core/lazy.py's lazy_module, so few remain, and no new one
may appear.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from tests.conftest import REPO

SOURCE = REPO / "spotrun"
# Comments that are instructions to a tool, not a reason.
TOOL_MARKS = re.compile(r"(type:\s*ignore(\[[^\]]*\])?|noqa(:[\w, ]*)?|pragma:[^#]*)")
Import = ast.Import | ast.ImportFrom


def _reasons(source: str) -> dict[int, str]:
    """Line number -> the text of a comment on it that says something (tool marks removed)."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            words = TOOL_MARKS.sub("", token.string.lstrip("#")).strip(" -#")
            if len(words) >= 2:
                found[token.start[0]] = words
    return found


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _in_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return True
    return False


def _group_so_far(node: Import, parent: ast.AST) -> list[Import]:
    """The imports that directly precede `node` in its block, and `node` itself."""
    for _, value in ast.iter_fields(parent):
        if isinstance(value, list) and any(item is node for item in value):
            at = end = next(i for i, item in enumerate(value) if item is node)
            while at > 0 and isinstance(value[at - 1], Import):
                at -= 1
            return value[at : end + 1]
    return [node]


def late_imports_without_reason(source: str) -> list[int]:
    """The lines of the imports inside functions that give no reason for being there."""
    tree = ast.parse(source)
    reasons = _reasons(source)
    lines = source.splitlines()
    parents = _parents(tree)
    missing = []
    for node in ast.walk(tree):
        if not isinstance(node, Import) or not _in_function(node, parents):
            continue
        own_lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
        if any(line in reasons for line in own_lines):
            continue
        above = [member.lineno - 1 for member in _group_so_far(node, parents[node])]
        if any(line in reasons and lines[line - 1].lstrip().startswith("#") for line in above):
            continue
        missing.append(node.lineno)
    return sorted(missing)


def test_every_late_import_in_spotrun_says_why() -> None:
    unexplained = [
        f"{path.relative_to(REPO)}:{line}: {path.read_text().splitlines()[line - 1].strip()}"
        for path in sorted(SOURCE.rglob("*.py"))
        for line in late_imports_without_reason(path.read_text())
    ]
    assert not unexplained, (
        "imports inside functions without a reason (move them to the module's top, or say why "
        "they are late in a comment on the line or just above the group):\n"
        + "\n".join(unexplained)
    )


# Function-level imports of spotrun's own modules (Dec 2026: 132 before issue 37.5, 11 after):
# only the way in's Ctrl-C guard, spotrun/cli/entry.py, keeps its own.
OWN_LATE_IMPORTS_CEILING = 11


def own_late_imports(source: str) -> list[int]:
    """The lines of the imports inside functions that import spotrun's own modules."""
    tree = ast.parse(source)
    parents = _parents(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, Import) or not _in_function(node, parents):
            continue
        if isinstance(node, ast.ImportFrom):
            own = node.level > 0 or (node.module or "").split(".")[0] == "spotrun"
        else:
            own = any(alias.name.split(".")[0] == "spotrun" for alias in node.names)
        if own:
            found.append(node.lineno)
    return found


def test_few_late_imports_of_spotrun_modules() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}: {path.read_text().splitlines()[line - 1].strip()}"
        for path in sorted(SOURCE.rglob("*.py"))
        for line in own_late_imports(path.read_text())
    ]
    assert len(found) <= OWN_LATE_IMPORTS_CEILING, (
        f"{len(found)} imports of spotrun's own modules inside functions, more than "
        f"{OWN_LATE_IMPORTS_CEILING}: import at the module's top; a module kept off a light path "
        "is a lazy_module (spotrun/core/lazy.py) named at the top:\n" + "\n".join(found)
    )


def test_own_late_imports_are_told_from_the_others() -> None:
    source = """
import spotrun.core


def f() -> None:
    import json
    import spotrun.core.config
    from spotrun.core import home
    from . import sibling
    from spotrunner import x
    from os import path
"""
    lines = source.splitlines()
    assert [lines[n - 1].strip() for n in own_late_imports(source)] == [
        "import spotrun.core.config",
        "from spotrun.core import home",
        "from . import sibling",
    ]


def test_a_late_import_without_a_reason_is_named() -> None:
    source = """
import os


def explained() -> None:
    # late: pydantic stays off --help
    import json

    import csv
    from pathlib import Path  # noqa: F401

    # late: and so is this one
    from decimal import Context


def inline() -> None:
    import torch  # late: torch only when training


def bare() -> None:
    x = 1
    import shlex


def tool_mark_only() -> None:
    import yaml  # type: ignore[import-untyped]


def comment_not_just_above() -> None:
    # late: a comment for the statement below, not the import
    x = 1
    import secrets


class Shape:
    import math  # a class body is not a function

    def method(self) -> None:
        from decimal import Decimal
"""
    unexplained = ("import shlex", "import yaml", "import secrets", "from decimal import Decimal")
    expected = [
        number
        for number, line in enumerate(source.splitlines(), start=1)
        if line.strip().startswith(unexplained)
    ]
    assert len(expected) == 4
    assert late_imports_without_reason(source) == expected
