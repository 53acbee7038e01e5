"""`spotrun sweep ...`: start a sweep, list sweeps, show one with its leaderboard, stop one.

`spotrun sweep RECIPE --grid ...` starts one (the `run` subcommand, named or not); `ls`,
`status` (alias `leaderboard`) and `stop` are subcommands. Here: the commands and their
arguments; a foreground sweep is followed by sweep_follow.py, the list and the leaderboard are
printed by sweep_print.py, and `rm` lives in sweep_rm.py.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer._click.shell_completion import CompletionItem  # typer vendors click: its own class

from spotrun.cli.common import Cloud
from spotrun.cli.complete import complete_recipe, complete_sweep
from spotrun.cli.launch import CapacityTerms, job_environment
from spotrun.cli.lazy import stderr_console, stdout_console
from spotrun.cli.library import api, load_settings
from spotrun.cli.notify import Notices, notify_on_option, notify_option
from spotrun.cli.sweep_follow import follow_sweep
from spotrun.cli.sweep_print import (
    print_csv,
    print_json,
    print_status,
    print_status_json,
    print_sweeps,
)
from spotrun.cli.sweep_rm import forget_sweep_command
from spotrun.cli.typer_app import SpotrunGroup, SpotrunTyper
from spotrun.core.errors import UsageError
from spotrun.core.lazy import lazy_module

if TYPE_CHECKING:
    from rich.console import Console

    from spotrun.core import launch_request as requests
    from spotrun.service import sweeps as service
    from spotrun.store import sweeps as sweep_store
    from spotrun.sweep import board
else:  # the service layer, the sweep store and the leaderboard (pydantic, ledger, run control:
    # ~0.15 s) stay off `sweep run -h` and --help: imported at their first use
    requests = lazy_module("spotrun.core.launch_request")
    service = lazy_module("spotrun.service.sweeps")
    sweep_store = lazy_module("spotrun.store.sweeps")
    board = lazy_module("spotrun.sweep.board")

out: Console = stdout_console()  # imported at first use: `spotrun --help` stays fast
err: Console = stderr_console()


class _SweepGroup(SpotrunGroup):
    """A first word that is no subcommand is the recipe of `sweep run`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["run", *args]
        return super().parse_args(ctx, args)

    def shell_complete(self, ctx: Any, incomplete: str) -> list[CompletionItem]:
        """`sweep cifar<Tab>`: the recipe of `sweep run`, beside the subcommands."""
        recipes = [CompletionItem(name) for name in complete_recipe(incomplete)]
        return [*super().shell_complete(ctx, incomplete), *recipes]


class EarlyStop(str, Enum):
    none = "none"
    asha = "asha"
    hyperband = "hyperband"


class Search(str, Enum):
    random = "random"
    grid = "grid"
    tpe = "tpe"
    cmaes = "cmaes"
    qmc = "qmc"
    pbt = "pbt"


class Mode(str, Enum):
    max = "max"
    min = "min"


sweep_app = SpotrunTyper(
    cls=_SweepGroup,
    help="Many trials of a recipe in parallel, early stopping, a leaderboard with cost. "
    "`spotrun sweep RECIPE --grid lr=0.1,0.2` starts one.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


# ------------------------------------------------------------------------ run
@sweep_app.command("run")
def run_sweep(
    recipe: str = typer.Argument(
        ..., help="recipe name (see `spotrun recipes`)", autocompletion=complete_recipe
    ),
    grid: list[str] = typer.Option([], "--grid", metavar="KEY=V1,V2", help="values to try"),
    random: int | None = typer.Option(None, "--random", metavar="N", help="N random trials"),
    space: list[str] = typer.Option(
        [], "--space", metavar="KEY=LOW:HIGH[:log]", help="a range --random draws from"
    ),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="for every trial"),
    max_parallel: int | None = typer.Option(
        None,
        "--max-parallel",
        help="trials at once (default: CPU count locally; on AWS 8 instances: 8 / --nodes)",
    ),
    gpus_per_trial: int | None = typer.Option(
        None, "--gpus-per-trial", help="GPUs each trial needs (default: the recipe's)"
    ),
    max_cost: float | None = typer.Option(
        None, "--max-cost", metavar="USD", help="the whole sweep's budget"
    ),
    search: Search | None = typer.Option(
        None,
        "--search",
        help="how trials get values: grid, random, a model that learns from the finished "
        "ones (tpe, cmaes, qmc; proposed as places free up), or pbt (population-based "
        "training: the worst go on from the best's checkpoints with perturbed values)",
    ),
    trials: int | None = typer.Option(
        None,
        "--trials",
        metavar="N",
        help="how many trials a --search other than grid runs (pbt: the population)",
    ),
    pbt_interval: int | None = typer.Option(
        None, "--pbt-interval", metavar="EPOCHS", help="pbt: epochs of training between exploits"
    ),
    pbt_perturb: float = typer.Option(
        1.2, "--pbt-perturb", metavar="FACTOR", help="pbt: a copied value times or / this"
    ),
    early_stop: EarlyStop = typer.Option(
        EarlyStop.none,
        "--pruner",
        "--early-stop",
        help="stop the losing trials early: ASHA, or Hyperband (brackets of ASHA)",
    ),
    grace_epochs: int = typer.Option(
        1, "--grace-epochs", help="ASHA/Hyperband: epochs every trial gets"
    ),
    reduction_factor: int = typer.Option(
        3, "--reduction-factor", help="ASHA/Hyperband: 1 in this many goes on at each rung"
    ),
    metric: str | None = typer.Option(None, "--metric", help="what to rank by (test_acc)"),
    mode: Mode | None = typer.Option(
        None, "--mode", help="whether higher --metric is better (default: the metric's)"
    ),
    cloud: Cloud | None = typer.Option(None, "--cloud", help="where to run; default from config"),
    name: str | None = typer.Option(None, "--name", help="a name to refer to the sweep by"),
    seed: int = typer.Option(0, "--seed", help="seed of the --random draws"),
    instance_type: str | None = typer.Option(None, "--instance-type", help="e.g. g5.12xlarge"),
    zone: str | None = typer.Option(None, "--zone", help="availability zone (aws)"),
    nodes: int | None = typer.Option(
        None, "--nodes", help="instances each trial trains on together with torchrun (aws)"
    ),
    env_: list[str] = typer.Option(
        [],
        "--env",
        metavar="KEY=VALUE",
        help="in every trial's environment (W&B's and MLflow's variables come along by themselves)",
    ),
    env_file: list[str] = typer.Option(
        [], "--env-file", metavar="FILE", help="KEY=VALUE lines for every trial's environment"
    ),
    wait_for_capacity: str | None = typer.Option(
        None,
        "--wait-for-capacity",
        metavar="DURATION",
        help="a trial that finds no capacity waits for it this long, asking again with "
        "backoff (e.g. 2h; never: fail at once); default from config",
    ),
    spot_policy: str | None = typer.Option(
        None,
        "--spot-policy",
        metavar="spot|auto|on-demand",
        help="every trial's: auto takes on-demand when spot cannot be had within the wait; "
        "default from config (spot)",
    ),
    detach: bool = typer.Option(False, "--detach", "-d", help="print the sweep id and return"),
    notify: list[str] = notify_option(),
    notify_on: list[str] = notify_on_option(),
) -> None:
    """Start a sweep of RECIPE: every --grid combination, or --random N draws.

    \b
    Examples:
      spotrun sweep digits-fast --grid lr=0.05,0.1,0.2
      spotrun sweep cifar10-fast --random 8 --space lr=0.01:1:log --early-stop asha
      spotrun sweep digits-fast --grid lr=0.1,0.2 --max-cost 1 --detach
      spotrun sweep digits-fast --search tpe --trials 20 --space lr=0.01:1:log --pruner hyperband
      spotrun sweep digits-fast --search pbt --trials 4 --pbt-interval 3 --space lr=0.01:1:log
    """
    settings = load_settings()
    notices = Notices.read(settings, notify, notify_on)  # checked before anything starts
    terms = CapacityTerms.read(settings, wait_for_capacity, spot_policy)  # launch's, per trial
    request = requests.LaunchRequest(
        cloud=cloud.value if cloud else None,
        name=name,
        instance_type=instance_type or None,
        zone=zone or None,
        nodes=nodes,
        max_cost_usd=max_cost,
        wait_for_capacity_s=terms.wait_s,
        spot_policy=terms.policy,
    )
    ledger = api.open_ledger(settings)
    prepared = service.prepare_sweep(
        settings,
        recipe,
        request,
        grid=grid,
        space=space,
        random=random,
        overrides=set_,
        max_parallel=max_parallel,
        gpus_per_trial=gpus_per_trial,
        early_stop=early_stop.value,
        search=search.value if search else None,
        search_trials=trials,
        metric=metric,
        mode=mode.value if mode else None,
        seed=seed,
        grace_epochs=grace_epochs,
        reduction_factor=reduction_factor,
        envs=job_environment(env_, env_file),
        pbt_interval=pbt_interval,
        pbt_perturb=pbt_perturb,
    )
    sweep = service.start_sweep(
        ledger, prepared, lambda sweep_id: notices.subscribe(ledger, sweep_id)
    )
    if sweep.message:  # the name was an ended sweep's: that one was renamed
        err.print(f"note: {sweep.message}", markup=False)
    if detach:
        sys.stdout.write(sweep.id + "\n")
        return
    for note in prepared.notes:
        err.print(f"note: {note}", markup=False)
    out.print(
        f"sweep {sweep.name} ({sweep.id}): {len(prepared.trials)} trials"
        f"{_of_nodes(prepared.plan.nodes)}, {prepared.spec.max_parallel} at once; "
        f"{prepared.plan.reason}",
        markup=False,
    )
    raise typer.Exit(follow_sweep(ledger, sweep.id))


def _of_nodes(nodes: int) -> str:
    return f" of {nodes} nodes each" if nodes > 1 else ""


# ------------------------------------------------------------------------- ls
@sweep_app.command("ls")
def list_sweeps(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every sweep, newest last, with its trials' progress.

    \b
    Examples:
      spotrun sweep ls
      spotrun sweep ls --json
    """
    ledger = api.open_ledger()
    store = sweep_store.SweepStore(ledger)
    rows = []
    for sweep in store.all():
        rows.append(
            {
                "id": sweep.id,
                "name": sweep.name,
                "recipe": sweep.recipe,
                "cloud": sweep.cloud,
                "state": sweep.state.value,
                "created_at": sweep.created_at,
                "message": sweep.message,
                **service.counts(store, sweep),
            }
        )
    if as_json:
        print_json(rows)
        return
    print_sweeps(rows)


# --------------------------------------------------------------------- status
def _status(
    sweep_ref: str,
    as_json: bool,
    as_csv: bool,
    plot: Path | None,
) -> None:
    if as_json and as_csv:
        raise UsageError("--json and --csv each print the leaderboard; choose one")
    if plot is not None:
        board.check_plot_path(plot)
    ledger = api.open_ledger()
    store = sweep_store.SweepStore(ledger)
    sweep = store.resolve(sweep_ref)
    entries = board.leaderboard(ledger, sweep)
    if plot is not None:
        drawn = board.write_plot(plot, sweep, entries)
        err.print(f"wrote {plot} ({drawn} trials)")
    if as_json:
        print_status_json(store, sweep, entries)
        return
    if as_csv:
        print_csv(board.flat_records(entries, sweep.spec.metric))
        return
    print_status(ledger, sweep, entries)


@sweep_app.command("leaderboard")  # the same command under the name users look for
@sweep_app.command("status")
def sweep_status(
    sweep: str = typer.Argument(
        ..., help="sweep name or id (prefix)", autocompletion=complete_sweep
    ),
    as_json: bool = typer.Option(False, "--json", help="the sweep and its leaderboard as JSON"),
    as_csv: bool = typer.Option(False, "--csv", help="the leaderboard as CSV"),
    plot: Path | None = typer.Option(
        None, "--plot", metavar="FILE.png", help="draw the metric against cost per trial"
    ),
) -> None:
    """A sweep's state and its leaderboard: trials ranked by the metric, with cost.

    \b
    Examples:
      spotrun sweep status SWEEP
      spotrun sweep leaderboard SWEEP --csv
      spotrun sweep status SWEEP --plot board.png
    """
    _status(sweep, as_json, as_csv, plot)


# ----------------------------------------------------------------------- stop
@sweep_app.command("stop")
def stop(
    sweep: str = typer.Argument(
        ..., help="sweep name or id (prefix)", autocompletion=complete_sweep
    ),
    timeout: float = typer.Option(300.0, "--timeout", help="seconds to wait for the end"),
) -> None:
    """Stop a sweep: no new trials; live ones checkpoint, sync and terminate.

    \b
    Examples:
      spotrun sweep stop SWEEP
    """
    ledger = api.open_ledger()
    ended = service.stop_sweep(ledger, sweep, timeout_s=timeout)
    out.print(f"sweep {ended.name} {ended.state.value}: {ended.message or ''}", markup=False)


sweep_app.command("rm")(forget_sweep_command)  # spotrun/cli/sweep_rm.py
