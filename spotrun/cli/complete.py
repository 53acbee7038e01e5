"""Shell completion of run and sweep references (`spotrun logs <Tab>`), read from the ledger,
and of recipe names wherever a recipe is taken (`spotrun launch dig<Tab>`).

Typer calls these on a Tab press in a fresh process; they read the ledger file directly
(spotrun.store.names) so the answer comes before the user notices the wait.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from typer._completion_classes import completion_init  # typer has no public name for these
from typer._completion_shared import get_completion_script

from spotrun.core.home import LEDGER_FILE, default_home
from spotrun.core.lazy import lazy_module
from spotrun.core.rundir import COMPLETE_VAR
from spotrun.remote_controller.record import record_path
from spotrun.store.names import refs

if TYPE_CHECKING:
    from spotrun import recipes
    from spotrun.remote_controller import forward
else:  # every command imports this module; these load on a Tab press that needs them:
    recipes = lazy_module("spotrun.recipes")  # pydantic and the recipes' checks (~0.3 s)
    forward = lazy_module("spotrun.remote_controller.forward")  # the ssh machinery (~11 ms)

TASK_FILE_SUFFIXES = (".yaml", ".yml")  # what `launch` reads as a task file


def complete_run(incomplete: str) -> list[tuple[str, str]]:
    """Runs by name (or id prefix), each with its state as the help text."""
    return _refs("runs", incomplete)


def complete_sweep(incomplete: str) -> list[tuple[str, str]]:
    return _refs("sweeps", incomplete)


def complete_recipe(incomplete: str) -> list[str]:
    """Recipe names (`spotrun launch dig<Tab>`)."""
    return [name for name in recipes.recipe_names() if name.startswith(incomplete)]


def complete_launchable(incomplete: str) -> list[str]:
    """What `launch` takes: a recipe name, or a task file (YAML) under the typed path."""
    folder, _, stem = incomplete.rpartition("/")
    where = Path(folder or ".")
    try:
        entries = sorted(where.iterdir()) if where.is_dir() else []
    except OSError:  # an unreadable folder completes nothing from it
        entries = []
    found = [
        (f"{folder}/{entry.name}" if folder else entry.name) + ("/" if entry.is_dir() else "")
        for entry in entries
        if entry.name.startswith(stem)
        and (entry.is_dir() or entry.suffix in TASK_FILE_SUFFIXES)
        and not entry.name.startswith(".")
    ]
    return complete_recipe(incomplete) + found


def _refs(table: str, incomplete: str) -> list[tuple[str, str]]:
    home = default_home().absolute()
    if record_path(home).exists():  # the runs live with the controller on another host
        return forward.remote_refs(home, table, incomplete)
    return refs(home / LEDGER_FILE, table, incomplete)


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion(shell: Shell = typer.Argument(..., help="the shell to complete in")) -> None:
    """Print the Tab-completion script for your shell: commands, options, choices, and run and
    sweep names from the ledger.

    \b
    Examples:
      eval "$(spotrun completion bash)"     in ~/.bashrc
      eval "$(spotrun completion zsh)"      in ~/.zshrc (after compinit)
      spotrun completion fish > ~/.config/fish/completions/spotrun.fish
    """
    script = get_completion_script(
        prog_name="spotrun", complete_var=COMPLETE_VAR, shell=shell.value
    )
    sys.stdout.write(script + "\n")


def prepare_completion() -> None:
    """On a Tab press (the script sets _SPOTRUN_COMPLETE), answer with typer's completion
    classes, which list choices and help texts the way the scripts above expect."""
    if os.environ.get(COMPLETE_VAR):
        completion_init()
