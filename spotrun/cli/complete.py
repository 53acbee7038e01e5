"""Shell completion of run and sweep references (`spotrun logs <Tab>`), read from the ledger.

Typer calls these on a Tab press in a fresh process; they read the ledger file directly
(spotrun.store.names) so the answer comes before the user notices the wait.
"""

from __future__ import annotations

from spotrun.core.home import LEDGER_FILE, default_home
from spotrun.store.names import refs


def complete_run(incomplete: str) -> list[tuple[str, str]]:
    """Runs by name (or id prefix), each with its state as the help text."""
    return refs(default_home().absolute() / LEDGER_FILE, "runs", incomplete)


def complete_sweep(incomplete: str) -> list[tuple[str, str]]:
    return refs(default_home().absolute() / LEDGER_FILE, "sweeps", incomplete)
