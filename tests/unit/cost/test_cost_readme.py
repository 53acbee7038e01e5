"""The docs' worked cost example (docs/cost.md) is what the code computes (scripts/cost_example.py)."""

from __future__ import annotations

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_readme_example_is_computed_by_the_code() -> None:
    example = runpy.run_path(str(REPO / "scripts" / "cost_example.py"))["example"]()
    readme = (REPO / "docs" / "cost.md").read_text()
    block = readme.split("<!-- cost-example -->\n", 1)[1].split("<!-- /cost-example -->", 1)[0]
    assert block == example, "worked example stale: run python scripts/cost_example.py"
    # the point of the example: the catalog figures differ from the bill
    assert "| spotrun: each second at the price in force | $0.89 |" in block
    assert "| the price at launch x duration | $0.84 |" in block
