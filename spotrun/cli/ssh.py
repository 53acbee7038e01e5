"""`spotrun ssh RUN`: a shell on a run's instance (its key, its pinned host key)."""

from __future__ import annotations

import os
import sys

import typer


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
    from rich.console import Console  # late: rich (~13 ms) off the CLI's import

    # late: pydantic and the ledger (~0.15 s) stay off the CLI's import
    from spotrun.service.runs import open_ledger
    from spotrun.service.shell import shell_command

    words = " ".join(command) if command else None
    shell = shell_command(
        open_ledger(), run, node=node, command=words, tty=words is None and sys.stdin.isatty()
    )
    if shell.note:
        Console(stderr=True, highlight=False, soft_wrap=True).print(shell.note, markup=False)
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
    # late: as in ssh()
    from spotrun.service.runs import open_ledger
    from spotrun.service.shell import no_terminal

    raise no_terminal(open_ledger(), run)
