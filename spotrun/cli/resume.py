"""`spotrun resume RUN` and `spotrun rm RUN`: continue an ended run, or forget one.

Registered on the app in spotrun/cli/main.py; the library work is spotrun.service.resume.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from spotrun.cli.complete import complete_run
from spotrun.cli.follow_view import follow_run
from spotrun.cli.lazy import stderr_console, stdout_console
from spotrun.cost.amounts import format_usd
from spotrun.service.lookup import open_ledger
from spotrun.service.resume import forget
from spotrun.service.resume import resume as resume_run

RUN_HELP = "run name or a unique prefix of its id"


def _consoles() -> tuple[Any, Any]:
    return stdout_console(), stderr_console()  # rich only once something is printed


def resume(
    run: str = typer.Argument(..., help=RUN_HELP, autocompletion=complete_run),
    max_cost: float | None = typer.Option(
        None, "--max-cost", metavar="USD", help="a new cap on the run's whole cost (every instance)"
    ),
    max_hours: float | None = typer.Option(
        None, "--max-hours", help="this many more hours from now"
    ),
    set_: list[str] = typer.Option(
        [], "--set", metavar="KEY=VALUE", help="change a recipe key from here on (epochs=30)"
    ),
    detach: bool = typer.Option(False, "--detach", "-d", help="print the run id and return"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="show only the run's stages"),
) -> None:
    """Continue a stopped or failed run from its newest checkpoint, on new capacity.

    The same run goes on (its name, id, folder and ledger rows); its cost adds up over every
    instance it has had. A budget-stopped run needs a larger --max-cost. A succeeded recipe
    run trains further when given more epochs (--set epochs=N): from its last checkpoint,
    with the recipe's schedule spanning the N epochs.

    \b
    Examples:
      spotrun resume long
      spotrun resume long --max-cost 5 --max-hours 2 -d
      spotrun resume long --set epochs=30    # train a recipe run further
    """
    out, err = _consoles()
    ledger = open_ledger()
    resumed = resume_run(ledger, run, max_cost_usd=max_cost, max_hours=max_hours, overrides=set_)
    r = resumed.run
    where = f"from {resumed.checkpoint}" if resumed.checkpoint else "with no checkpoint here"
    err.print(
        f"resuming {r.name} ({r.id}) {where}; {format_usd(resumed.spent_usd)} spent so far",
        markup=False,
    )
    if resumed.further is not None:
        more = resumed.further
        err.print(
            f"{r.name} succeeded after {more.epochs_before} epochs: training further to "
            f"{more.epochs_now}",
            markup=False,
        )
    if detach:
        sys.stdout.write(r.id + "\n")
        err.print(
            f"follow it with `spotrun logs -f {r.name}`, stop it with `spotrun stop {r.name}`",
            markup=False,
        )
        return
    raise typer.Exit(follow_run(ledger, r.id, out, err, start=resumed.follow_from, quiet=quiet))


def rm(run: str = typer.Argument(..., help=RUN_HELP, autocompletion=complete_run)) -> None:
    """Forget an ended run: its ledger rows (cost included), its run folder, and on AWS its
    stored files in S3 and its SSH keys.

    A live run is refused: stop it first.

    \b
    Examples:
      spotrun rm long
    """
    out, _ = _consoles()
    gone = forget(open_ledger(), run)
    out.print(f"removed {gone.name} ({gone.id}) and {gone.run_dir}", markup=False)
