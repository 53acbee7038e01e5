"""`spotrun --help` and `spotrun ls` answered without typer (spotrun/cli/entry.py) print what
the full CLI printed, through the real command line, piped and on a real terminal (a pty).

The references are the full CLI's own rendering: typer's help page (spotrun.cli.main._run),
and `ls`'s table laid out by rich as the command did before it had a quick path.
"""

from __future__ import annotations

import fcntl
import json
import os
import struct
import subprocess
import sys
import termios

import pytest

from spotrun.cli.help_snapshot import SNAPSHOT
from tests.conftest import REPO, Env

TYPER_HELP = "from spotrun.cli.main import _run; _run(['--help'])"

# `ls`'s table as rich lays it out through spotrun's stdout console: the command's body before
# plain_table existed
RICH_LS = """
from spotrun.cli.follow_view import fmt_duration, fmt_metrics
from spotrun.cli.render import Table, money, out
from spotrun.core.terminal_text import printable
from spotrun.service.lookup import open_ledger, run_summary

ledger = open_ledger()
rows = [run_summary(ledger, r) for r in ledger.list_runs(include_all=False)]
if not rows:
    out.print("no runs yet; start one with `spotrun launch digits-fast`")
else:
    table = Table(box=None, pad_edge=False)
    for col in ("ID", "NAME", "RECIPE", "CLOUD", "STATE", "STARTED", "DURATION", "COST", "METRICS"):
        table.add_column(col, no_wrap=col in ("ID", "STATE"))
    for row in rows:
        table.add_row(
            row["id"], row["name"], row["recipe"], row["cloud"], row["state"],
            (row["started"] or row["created"] or "").replace("T", " ").rstrip("Z"),
            fmt_duration(row["duration_s"]),
            money(row["cost_usd"]) if row["cost_usd"] is not None else "?",
            printable(fmt_metrics(row["metrics"])),
        )
    out.print(table)
"""


def _python(env: Env, *args: str, columns: str | None = None) -> str:
    variables = dict(env.vars)
    if columns is not None:
        variables["COLUMNS"] = columns
    proc = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=variables, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _on_terminal(env: Env, argv: list[str], columns: int) -> bytes:
    """What `argv` writes on a pseudo-terminal `columns` wide (escape codes included)."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    variables = {k: v for k, v in env.vars.items() if k not in ("COLUMNS", "LINES")}
    variables["TERM"] = "xterm-256color"
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        variables.pop(name, None)
    proc = subprocess.Popen(
        argv, stdin=follower, stdout=follower, stderr=subprocess.PIPE, env=variables, cwd=REPO
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer of the terminal is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    return b"".join(chunks)


def test_help_is_typers_page(env: Env) -> None:
    page = _python(env, "-m", "spotrun", "--help")
    assert page == _python(env, "-c", TYPER_HELP), (
        "spotrun/cli/root_help.txt is out of date: "
        ".venv/bin/python -m spotrun.cli.help_snapshot rewrites it"
    )
    assert page == SNAPSHOT.read_text() and page.startswith("Usage: spotrun [OPTIONS] COMMAND")
    assert _python(env, "-m", "spotrun", "-h") == page
    # A narrow terminal: click lays the page out narrower, so typer prints it
    narrow = _python(env, "-m", "spotrun", "--help", columns="60")
    assert narrow == _python(env, "-c", TYPER_HELP, columns="60") and narrow != page


@pytest.mark.slow
def test_ls_prints_what_rich_printed(env: Env) -> None:
    assert _python(env, "-m", "spotrun", "ls") == _python(env, "-c", RICH_LS)  # no runs yet
    for i in range(2):
        env.cli("launch", "--cmd", f"echo {i}", "--name", f"quick-{i}", check=True, timeout=300)
    piped = _python(env, "-m", "spotrun", "ls")
    assert "quick-0" in piped and "quick-1" in piped
    assert piped == _python(env, "-c", RICH_LS)
    # on a terminal: the header in bold; at 60 columns the table does not fit and rich
    # shortens its cells
    for columns in (150, 60):
        shown = _on_terminal(env, [sys.executable, "-m", "spotrun", "ls"], columns)
        assert shown == _on_terminal(env, [sys.executable, "-c", RICH_LS], columns), columns
        assert shown.startswith(b"\x1b[1mID "), shown
        assert (b"quick-1" in shown) == (columns == 150), shown
    listed = json.loads(_python(env, "-m", "spotrun", "ls", "--all", "--json"))
    assert sorted(r["name"] for r in listed) == ["quick-0", "quick-1"]
    assert _python(env, "-m", "spotrun", "ls", "-a", "--json") == _python(
        env, "-c", "from spotrun.cli.main import _run; _run(['ls', '--all', '--json'])"
    )
