"""Tables printed exactly as rich prints `Table(box=None, pad_edge=False)`, without rich.

Importing rich and laying out a table costs `spotrun ls` about 20 ms of its ~100 ms. For the
common table, plain ASCII cells that fit the console's width, rich's output is simple: each
column as wide as its widest cell, two spaces between columns, and on a terminal the header
line in bold. `plain_table` writes exactly that and answers None for anything else (markup,
emoji codes, wide or control characters, a table too wide), where the caller uses rich.
tests/unit/cli/test_plain_table.py holds it to rich's own output.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import TextIO

from spotrun.cli.lazy import PIPED_WIDTH

BOLD, RESET = "\x1b[1m", "\x1b[0m"  # rich's table.header style: bold

_PLAIN = re.compile(r"[ -~]*")  # printable ASCII: one cell per character
# A ':' may start a rich emoji code (`:smile:`); only the two-digit fields of a time are safe
# (no emoji has a two-digit name)
_CLOCK = re.compile(r"[0-9 -]*(?::[0-9][0-9])*")


def plain_cell(text: str) -> bool:
    """Whether rich shows `text` as it is: no markup, emoji code, wide or control character."""
    if not _PLAIN.fullmatch(text) or "[" in text:
        return False
    return ":" not in text or _CLOCK.fullmatch(text) is not None


def plain_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    stream: TextIO,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The text rich's stdout console (spotrun/cli/lazy.py) would print for this table on
    `stream`, or None where only rich can tell."""
    env = os.environ if environ is None else environ
    if not all(plain_cell(cell) for row in (headers, *rows) for cell in row):
        return None
    widths = [max(len(row[i]) for row in (headers, *rows)) for i in range(len(headers))]
    terminal = _is_terminal(env, stream.isatty())
    dumb = terminal and env.get("TERM", "").lower() in ("dumb", "unknown")
    width = _console_width(env, dumb, None if stream.isatty() else PIPED_WIDTH)
    if sum(widths) + 2 * (len(widths) - 1) > width:
        return None  # rich would shrink or wrap columns
    lines = []
    if terminal and not dumb:  # rich has a color system: the header in bold
        # each cell and each padding space is a segment of its own, styled on its own
        cells = [f"{BOLD}{h.ljust(w)}{RESET}" for h, w in zip(headers, widths, strict=True)]
        lines.append(f"{BOLD} {RESET}{BOLD} {RESET}".join(cells))
    else:
        lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    return "\n".join(lines) + "\n"


def _is_terminal(env: Mapping[str, str], isatty: bool) -> bool:
    """rich's Console.is_terminal: TTY_COMPATIBLE, then FORCE_COLOR, then isatty."""
    tty_compatible = env.get("TTY_COMPATIBLE", "")
    if tty_compatible in ("0", "1"):
        return tty_compatible == "1"
    force_color = env.get("FORCE_COLOR")
    if force_color is not None:
        return force_color != ""
    return isatty


def _console_width(env: Mapping[str, str], dumb: bool, given: int | None) -> int:
    """rich's Console.size width, on Linux, for a console made with width `given`."""
    columns, lines = env.get("COLUMNS"), env.get("LINES")
    if given is None and columns is not None and columns.isdigit():
        given = int(columns)
    if given is not None and lines is not None and lines.isdigit():
        return given
    if dumb:
        return 80
    if given is not None:
        return given
    for fd in (0, 1, 2):  # the first of stdin, stdout, stderr that is a terminal
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            continue
    return 80
