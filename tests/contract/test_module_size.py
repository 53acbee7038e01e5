"""The house rule "modules under ~500 lines" (docs/ARCHITECTURE.md, DESIGN.md), held: a module
that outgrows it is split along a seam (one job per module) before it lands."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MAX_LINES = 500
PACKAGES = ("spotrun", "spotlab")


def test_no_module_is_over_500_lines() -> None:
    too_long = [
        f"{path.relative_to(REPO)}: {lines} lines"
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    ]
    assert not too_long, (
        f"modules over {MAX_LINES} lines (split each along a seam, one job per module):\n"
        + "\n".join(too_long)
    )
