"""`spotrun ssh RUN`: a shell on a run's instance (its key, its pinned host key)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import typer

from spotrun.cli.library import api
from spotrun.cli.render import err
from spotrun.core.lazy import lazy_module

if TYPE_CHECKING:
    from spotrun.service import shell as shells
else:  # pydantic and the run records (~0.15 s): `ls` and `status` import this module too
    shells = lazy_module("spotrun.service.shell")


def ssh(
    run: str = typer.Argument(..., help="run name or a unique prefix of its id"),
    command: list[str] = typer.Argument(
        None, metavar="[COMMAND]...", help="run this instead of a login shell"
    ),
    node: int = typer.Option(0, "--node", help="which node of a multi-node run"),
) -> None:
    """Open a shell on a running run's instance (the local cloud: in the run's folder).

    spotrun keeps SPOTRUN_HOME/ssh_config with a `Host spotrun-NAME` entry per running run;
    `Include` it from ~/.ssh/config and plain ssh, scp and editors reach the instance too.

    \b
    Examples:
      spotrun ssh my-run
      spotrun ssh my-run nvidia-smi
      spotrun ssh my-run --node 1 "df -h"
    """
    words = " ".join(command) if command else None
    shell = shells.shell_command(
        api.open_ledger(), run, node=node, command=words, tty=words is None and sys.stdin.isatty()
    )
    if shell.note:
        err.print(shell.note, markup=False)
    if shell.cwd is not None:
        os.chdir(shell.cwd)
    sys.stdout.flush()
    sys.stderr.flush()
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    os.execvpe(shell.argv[0], shell.argv, env)


def require_terminal(run: str) -> None:
    """`attach` without a terminal: say where the session is instead of tmux's raw error."""
    if sys.stdin.isatty():
        return
    raise shells.no_terminal(api.open_ledger(), run)
