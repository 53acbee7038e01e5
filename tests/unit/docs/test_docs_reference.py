"""The site's generated reference pages cannot drift from the code: regenerating them gives the
committed text, and a page's help block is what the real `spotrun ... --help` prints."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

from spotrun.core.config import AwsSettings, Settings
from spotrun.core.settings_run import RunSettings

REPO = Path(__file__).resolve().parents[3]


def test_regenerating_the_reference_pages_changes_nothing() -> None:
    stale = runpy.run_path(str(REPO / "scripts" / "gen_docs.py"))["stale_pages"]()
    assert stale == [], f"stale: {stale}; run .venv/bin/python scripts/gen_docs.py"


def test_cli_page_holds_what_help_prints() -> None:
    page = (REPO / "docs" / "reference" / "cli.md").read_text()
    for words in (["data", "get"], ["launch"]):
        printed = subprocess.run(
            [sys.executable, "-m", "spotrun", *words, "--help"],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "COLUMNS": "80"},
            cwd=REPO,
        ).stdout
        title = " ".join(["spotrun", *words])
        assert f"## {title}\n\n```text\n{printed.rstrip()}\n```" in page


def test_config_page_names_every_setting() -> None:
    page = (REPO / "docs" / "reference" / "config.md").read_text()
    keys = [k for k in Settings.model_fields if k not in ("home", "aws", "run")]
    keys += [f"aws.{k}" for k in AwsSettings.model_fields]
    keys += [f"run.{k}" for k in RunSettings.model_fields]
    assert [k for k in keys if f"| `{k}` |" not in page] == []
