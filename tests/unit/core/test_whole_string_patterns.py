"""A pattern meant for a whole string is used with fullmatch (issue 38, point 11).

`re.match(r"^abc$", "abc\n")` matches: `$` also matches before a trailing newline, so a name
such as `--name $'abc\n'` passed every `^...$` check. Every check of a whole string uses
`fullmatch` (and needs no anchors); this test scans spotrun/ for an anchored pattern
(`^...` or `...$`) used with `match` or `search`, through a compiled name or directly.
"""

from __future__ import annotations

import ast
import re

import pytest

from spotrun.core.config import NAME_PATTERN, LaunchSpec
from spotrun.core.durations import parse_duration
from spotrun.core.errors import SpotrunError
from spotrun.core.jobspec import ENV_NAME, JobSpec
from spotrun.core.rundir import CHECKPOINT_NAME
from spotrun.core.safe_paths import plain_folder_name
from spotrun.datasets.spec import parse_data
from spotrun.remote_controller.record import parse_ssh_url
from tests.conftest import REPO

SOURCE = REPO / "spotrun"
SEARCHES = {"match", "search"}
REGEX_CALLS = {"compile", "match", "search", "fullmatch"}


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _anchored(pattern: str) -> bool:
    """Starts with `^` or ends with a `$` that is not escaped."""
    if pattern.startswith("^"):
        return True
    if not pattern.endswith("$"):
        return False
    before = pattern[:-1]
    return (len(before) - len(before.rstrip("\\"))) % 2 == 0


def _is_re_call(node: ast.Call, names: set[str]) -> bool:
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in names
        and isinstance(func.value, ast.Name)
        and func.value.id == "re"
    )


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def anchored_searches(sources: dict[str, str]) -> list[str]:
    """file:line of each anchored pattern used with match/search in `sources` (name -> text)."""
    trees = {name: ast.parse(text) for name, text in sources.items()}
    compiled: set[str] = set()  # names bound to an anchored re.compile(...), in any module
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                call = node.value
                pattern = _literal(call.args[0]) if call.args else None
                if _is_re_call(call, {"compile"}) and pattern is not None and _anchored(pattern):
                    compiled |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr not in SEARCHES:
                continue
            receiver = node.func.value
            if _is_re_call(node, SEARCHES):
                pattern = _literal(node.args[0]) if node.args else None
                if pattern is not None and _anchored(pattern):
                    found.append(f"{name}:{node.lineno}")
            elif _name_of(receiver) in compiled:
                found.append(f"{name}:{node.lineno}")
    return found


def test_no_anchored_pattern_in_spotrun_is_used_with_match_or_search() -> None:
    sources = {
        str(path.relative_to(REPO)): path.read_text() for path in sorted(SOURCE.rglob("*.py"))
    }
    found = anchored_searches(sources)
    assert found == [], f"use fullmatch (without ^ and $) for a whole string: {found}"


def test_the_scan_catches_each_form() -> None:
    made_up = {
        "a.py": 'import re\nNAME = re.compile(r"^[a-z]+$")\nok = NAME.match(x)\n',
        "b.py": "import re\nfrom a import NAME\nok = NAME.search(x)\n",
        "c.py": 'import re\nok = re.match(r"[a-z]+$", x)\n',
        "d.py": "import re\nimport a\nok = a.NAME.match(x)\n",
        "fine.py": (
            'import re\nWHOLE = re.compile(r"[a-z]+")\nok = WHOLE.fullmatch(x)\n'
            'DOLLAR = re.compile(r"cost \\$")\nok = DOLLAR.search(x)\n'
            'ok = re.search(r"authorized: (\\w+)", x)\n'
        ),
    }
    assert anchored_searches(made_up) == ["a.py:3", "b.py:3", "c.py:2", "d.py:3"]


@pytest.mark.parametrize(
    "check",
    [
        lambda: LaunchSpec(recipe="x", name="abc\n"),
        lambda: JobSpec.for_recipe("x", envs={"LR\n": "1"}),
        lambda: plain_folder_name("train\n", what="split"),
        lambda: parse_data("s3://bucket-name\n/x"),
    ],
)
def test_a_trailing_newline_is_refused(check: object) -> None:
    with pytest.raises((SpotrunError, ValueError)):
        check()  # type: ignore[operator]


def test_whole_string_patterns_refuse_a_trailing_newline() -> None:
    for pattern, good in (
        (NAME_PATTERN, "abc"),
        (ENV_NAME, "LR"),
        (CHECKPOINT_NAME, "ckpt-000000001.pt"),
    ):
        assert pattern.fullmatch(good) and not pattern.fullmatch(good + "\n")
    assert re.match(r"^abc$", "abc\n")  # why: `$` also matches before a last newline
    assert parse_duration(" 90s\n") == 90.0  # stripped first: surrounding space is fine
    assert parse_ssh_url("ssh://me@host:2222\n").port == 2222
