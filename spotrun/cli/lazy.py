"""Import on first use, so `spotrun --help` and `spotrun ls` load only what they need
(spotrun/core/lazy.py is the mechanism; rich's consoles are made here).

The command modules name the library (`api.launch(...)`) and a console (`out.print(...)`) at
their top level as before; the module behind `api`, and rich behind `out`, are imported the
first time a command body touches them. Type checkers see the real objects (see library.py's
`TYPE_CHECKING` block).
"""

from __future__ import annotations

import sys
from typing import Any

from spotrun.core.lazy import LazyModule, lazy_module

__all__ = ["LazyModule", "lazy_module", "real_console", "stderr_console", "stdout_console"]

PIPED_WIDTH = 200  # the stdout console's width when piped: tables are not folded at 80


class LazyConsole:
    """A rich Console made at its first use (rich costs tens of ms to import)."""

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Any = None

    def _load(self) -> Any:
        if self._console is None:
            from rich.console import Console  # late: the point of this class

            if self._stderr:
                self._console = Console(stderr=True, highlight=False, soft_wrap=True)
            else:
                # Wide when piped, so tables and log lines are not folded at 80 columns.
                width = None if sys.stdout.isatty() else PIPED_WIDTH
                self._console = Console(highlight=False, soft_wrap=True, width=width)
        return self._console

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)


def real_console(console: Any) -> Any:
    """The rich Console itself behind a LazyConsole (rich's Live drives it as a context manager
    and by identity, which a proxy cannot stand in for)."""
    return console._load() if isinstance(console, LazyConsole) else console


def stdout_console() -> Any:
    return LazyConsole(stderr=False)


def stderr_console() -> Any:
    return LazyConsole(stderr=True)
