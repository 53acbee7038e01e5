"""`spotrun sweep rm SWEEP`: forget an ended sweep (registered on sweep_app in sweep.py)."""

from __future__ import annotations

import typer

from spotrun.cli.complete import complete_sweep
from spotrun.cli.lazy import stdout_console


def forget_sweep_command(
    sweep: str = typer.Argument(
        ..., help="sweep name or id (prefix)", autocompletion=complete_sweep
    ),
) -> None:
    """Forget an ended sweep: its rows, its folder, and every trial as `spotrun rm` forgets a
    run (ledger rows with their cost, run folders, stored files in S3, SSH keys).

    A live sweep is refused: stop it first.

    \b
    Examples:
      spotrun sweep rm SWEEP
    """
    # late: the service layer (pydantic, ledger, run control: ~0.15 s) stays off the CLI's import
    from spotrun.service import runs as api
    from spotrun.service.resume import forget_sweep

    gone, trials = forget_sweep(api.open_ledger(), sweep)
    stdout_console().print(
        f"removed sweep {gone.name} ({gone.id}), its {trials} trial run(s) and {gone.sweep_dir}",
        markup=False,
    )
