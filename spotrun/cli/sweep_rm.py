"""`spotrun sweep rm SWEEP`: forget an ended sweep (registered on sweep_app in sweep.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from spotrun.cli.complete import complete_sweep
from spotrun.cli.lazy import stdout_console
from spotrun.cli.library import api
from spotrun.core.lazy import lazy_module

if TYPE_CHECKING:
    from spotrun.service import resume as resumes
else:  # the service layer (pydantic, run control: ~0.15 s) stays off `sweep run -h`
    resumes = lazy_module("spotrun.service.resume")


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
    gone, trials = resumes.forget_sweep(api.open_ledger(), sweep)
    stdout_console().print(
        f"removed sweep {gone.name} ({gone.id}), its {trials} trial run(s) and {gone.sweep_dir}",
        markup=False,
    )
