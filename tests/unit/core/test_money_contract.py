"""Dollars are put into words in spotrun/core/money.py only (issue 34: `cost` said $0.00, a
leaderboard $0.0006 and `status --json` 0.001101 for the same run).

This scans spotrun/'s f-strings and fails on an amount formatted by hand: a `$` written just
before a formatted value (f"${usd:.2f}"), or a dollar figure given a format spec
(f"{cost_usd:.4f}"). Views call show_usd, show_usd_per_hour or rate_digits instead; JSON and
CSV carry exact_usd's unrounded dollars.
"""

from __future__ import annotations

import ast
import re

from tests.conftest import REPO

SOURCE = REPO / "spotrun"
CONTRACT = SOURCE / "core" / "money.py"
# a value that holds dollars, by the names spotrun gives them
DOLLAR_NAME = re.compile(r"usd|cost(?!_s\b)|spent|price|money|dollar", re.IGNORECASE)


def _by_hand(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.JoinedStr):
            continue
        parts = node.values
        for before, part in zip([None, *parts], parts):
            if not isinstance(part, ast.FormattedValue):
                continue
            shown = ast.unparse(part.value)
            dollar_sign = (
                isinstance(before, ast.Constant)
                and isinstance(before.value, str)
                and before.value.endswith("$")
            )
            if dollar_sign or (part.format_spec is not None and DOLLAR_NAME.search(shown)):
                found.append((node.lineno, shown))
    return found


def test_no_module_formats_dollars_by_hand() -> None:
    offences = []
    for path in sorted(SOURCE.rglob("*.py")):
        if path == CONTRACT:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, shown in _by_hand(tree):
            offences.append(f"{path.relative_to(REPO)}:{line}: {{{shown}}}")
    assert not offences, "format dollars with spotrun.core.money:\n" + "\n".join(offences)


def test_the_scan_sees_a_hand_formatted_amount() -> None:
    tree = ast.parse('a = f"${x:.2f}"\nb = f"{o.spot_usd_per_hour:.4f}"\nc = f"{n:.1f} s"')
    assert [shown for _, shown in _by_hand(tree)] == ["x", "o.spot_usd_per_hour"]
