"""Shell completion of run and sweep references (`spotrun logs <Tab>`), read from the ledger.

Typer calls these on a Tab press in a fresh process; they read the ledger file directly
(spotrun.store.names) so the answer comes before the user notices the wait.
"""

from __future__ import annotations

import os
import sys
from enum import Enum

import typer

from spotrun.core.home import LEDGER_FILE, default_home
from spotrun.store.names import refs


def complete_run(incomplete: str) -> list[tuple[str, str]]:
    """Runs by name (or id prefix), each with its state as the help text."""
    return refs(default_home().absolute() / LEDGER_FILE, "runs", incomplete)


def complete_sweep(incomplete: str) -> list[tuple[str, str]]:
    return refs(default_home().absolute() / LEDGER_FILE, "sweeps", incomplete)


COMPLETE_VARIABLE = "_SPOTRUN_COMPLETE"  # set by the shell's completion function on Tab


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
    from typer._completion_shared import get_completion_script  # typer has no public name

    script = get_completion_script(
        prog_name="spotrun", complete_var=COMPLETE_VARIABLE, shell=shell.value
    )
    sys.stdout.write(script + "\n")


def prepare_completion() -> None:
    """On a Tab press (the script sets _SPOTRUN_COMPLETE), answer with typer's completion
    classes, which list choices and help texts the way the scripts above expect."""
    if os.environ.get(COMPLETE_VARIABLE):
        from typer._completion_classes import completion_init

        completion_init()
