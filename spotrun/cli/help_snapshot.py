"""`spotrun --help`, stored: the root help page as typer renders it, printed without typer.

typer and the command modules cost `spotrun --help` about 50 ms of CPU to lay out a page that
changes only when a command or its first help line does. On a terminal at least 80 columns
wide (and when piped) click lays help out 78 columns wide, so the page is the same text every
time: spotrun/cli/entry.py prints it from root_help.txt, and tests/unit/cli/test_help_snapshot.py
fails when the file differs from what typer renders now. After changing a command, rewrite it:

    .venv/bin/python -m spotrun.cli.help_snapshot
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Callable
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("root_help.txt")
MIN_COLUMNS = 80  # click's help formatter: min(terminal columns, 80) - 2, so 78 from here up


def stored_help() -> str | None:
    """The stored root help page when typer would print that very text, else None."""
    if shutil.get_terminal_size().columns < MIN_COLUMNS:  # click asks the same way
        return None
    try:
        return SNAPSHOT.read_text()
    except FileNotFoundError:
        return None


def rendered_help(run_cli: Callable[[list[str]], int]) -> str:
    """The root help page as typer renders it now, at 80 columns (`run_cli`: main.py's _run)."""
    page = io.StringIO()
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(MIN_COLUMNS)
    try:
        with contextlib.redirect_stdout(page):
            run_cli(["--help"])
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    return page.getvalue()


if __name__ == "__main__":
    from spotrun.cli.main import _run  # the full CLI (~50 ms) renders the page, never --help

    SNAPSHOT.write_text(rendered_help(_run))
    print(f"wrote {SNAPSHOT}")
