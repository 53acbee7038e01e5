"""The `spotrun` command: the app, its commands in help's order, and the one way it exits.

Each command group lives in its own module here (launch, prices, run_commands, gc, cost,
recipes, data, training, sweep, remote, resume, ...); this module names them, in the order
`spotrun --help` lists them, and imports none: a command's module is imported when it runs
(LazyCommand, spotrun/cli/typer_app.py). No cloud SDKs here.
"""

from __future__ import annotations

import sys

import typer

from spotrun import __version__
from spotrun.cli.common import HELP_OPTIONS, interrupted_early, leave, print_error
from spotrun.cli.complete import prepare_completion
from spotrun.cli.forwarding import forward_if_remote
from spotrun.cli.render import err
from spotrun.cli.typer_app import LazyCommand, LazyGroup, SpotrunTyper
from spotrun.core.errors import SpotrunError
from spotrun.core.exitcodes import SUCCESS

try:  # typer >= 0.20 carries its own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

# The order here is the order of `spotrun --help`: keep it when adding one. Each command's
# module is imported only when that command runs or shows its help (spotrun/cli/typer_app.py).
COMMANDS = (
    LazyCommand(
        "completion",
        "spotrun.cli.complete:completion",
        "Print the Tab-completion script for your shell: commands, options, choices, and run "
        "and sweep names from the ledger.",
    ),
    LazyCommand(
        "doctor",
        "spotrun.cli.doctor:doctor",
        "Check, before anything is created, what a first AWS launch needs.",
    ),
    LazyCommand(
        "plot",
        "spotrun.cli.plot:plot",
        "Overlay runs' training curves (a metric against step, training time or cost).",
    ),
    LazyCommand(
        "ssh",
        "spotrun.cli.ssh:ssh",
        "Open a shell on a running run's instance (the local cloud: in the run's folder).",
    ),
    LazyCommand(
        "ui",
        "spotrun.cli.ui:ui",
        "A live web dashboard of runs, sweeps and costs, on this machine (Ctrl-C ends it).",
    ),
    LazyCommand(
        "resume",
        "spotrun.cli.resume:resume",
        "Continue a stopped or failed run from its newest checkpoint, on new capacity.",
    ),
    LazyCommand(
        "rm",
        "spotrun.cli.resume:rm",
        "Forget an ended run: its ledger rows (cost included), its run folder, and on AWS its "
        "stored files in S3 and its SSH keys.",
    ),
    LazyCommand(
        "pull",
        "spotrun.cli.remote:pull",
        "Bring a run's folder (metrics, logs, checkpoints, outputs) from the controller host to "
        "this machine; run it again and only what changed moves.",
    ),
    LazyCommand(
        "launch",
        "spotrun.cli.launch:launch",
        "Launch a recipe, a task file or your own command (--cmd) on the cheapest capacity "
        "that fits, and follow it to the end.",
    ),
    LazyCommand(
        "prices",
        "spotrun.cli.prices:prices",
        "The spot offers a launch chooses from, cheapest first, beside on-demand prices "
        "(without AWS credentials: the GPU types of spotrun's shipped, dated catalog).",
    ),
    LazyCommand(
        "ls",
        "spotrun.cli.run_commands:list_runs",
        "List runs: live ones and the most recent finished ones.",
    ),
    LazyCommand(
        "status",
        "spotrun.cli.run_commands:status",
        "Show one run: state history, instances, events, metrics, cost (no run: the runs).",
    ),
    LazyCommand(
        "logs",
        "spotrun.cli.run_commands:logs",
        "Print the job's output (what its tmux session shows).",
    ),
    LazyCommand(
        "attach",
        "spotrun.cli.run_commands:attach",
        "Put this terminal into the run's live tmux session (detach with Ctrl-b d).",
    ),
    LazyCommand(
        "exec",
        "spotrun.cli.run_commands:exec_",
        "Run another command on a live run's instance, in a new window of its tmux session.",
    ),
    LazyCommand(
        "stop",
        "spotrun.cli.run_commands:stop",
        "Stop runs: each job checkpoints, results are synced, instances terminated.",
    ),
    LazyCommand(
        "gc",
        "spotrun.cli.gc:gc_command",
        "List (and with --yes remove) spotrun-tagged AWS resources that no live run owns.",
    ),
    LazyCommand(
        "cost",
        "spotrun.cli.cost:cost",
        "What runs cost, as AWS bills it: instance-hours, spot and on-demand USD, saving.",
    ),
    LazyCommand(
        "methods",
        "spotrun.cli.recipes:methods",
        "The speed-up methods a recipe can switch on (--set methods.NAME={}), in the order they "
        "apply, with their options and conflicts (spotrun/train/methods/README.md explains "
        "each).",
    ),
    LazyCommand(
        "train",
        "spotrun.cli.training:train",
        "Train in the foreground (what runs inside a run's tmux session); resumes in RUN_DIR.",
    ),
    LazyCommand(
        "sample",
        "spotrun.cli.training:sample",
        "Text from a language-model run's newest checkpoint.",
    ),
    LazyCommand(
        "recipes",
        "spotrun.cli.recipes:recipes_app",
        "List recipes, or show one in full.",
    ),
    LazyCommand(
        "sweep",
        "spotrun.cli.sweep:sweep_app",
        "Many trials of a recipe in parallel, early stopping, a leaderboard with cost.",
    ),
    LazyCommand(
        "data",
        "spotrun.cli.data:data_app",
        "Data sets: get a known public one into the data folder; push a folder to S3 as tar "
        "shards, list what was pushed.",
    ),
    LazyCommand(
        "notify",
        "spotrun.cli.notify:notify_app",
        "Notifications: send a test message to a target; list what was sent and tried.",
    ),
    LazyCommand(
        "controller",
        "spotrun.cli.remote:controller_app",
        "Where this home's controller lives: this machine, or an always-on host of yours.",
    ),
)


class _Root(LazyGroup):
    lazy_commands = COMMANDS


app = SpotrunTyper(
    name="spotrun",
    no_args_is_help=True,
    # `spotrun completion SHELL` instead of typer's --install-completion: typer's root options
    # would cost every subcommand a pydantic import (their None defaults get coerced)
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=HELP_OPTIONS,  # every subcommand inherits -h from here
    cls=_Root,
)


def _print_version(wanted: bool) -> None:
    if wanted:
        sys.stdout.write(f"spotrun {__version__}\n")
        raise typer.Exit(SUCCESS)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print spotrun's version and exit.",
    ),
) -> None:
    """Train deep-learning models fast and cheaply on AWS spot GPUs.

    \b
    Examples:
      spotrun launch digits-fast          train a recipe on this machine
      spotrun ls                          live and recent runs
      spotrun logs -f RUN                 follow a run's output
      eval "$(spotrun completion bash)"   Tab completion (bash, zsh, fish)
    """


# ---------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    code = _run(argv)
    if argv is None:  # the program itself: everything it wrote is committed or flushed
        leave(code)
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    prepare_completion()
    try:
        # a controller on another host carries out the run commands (spotrun/cli/forwarding.py)
        forwarded = forward_if_remote(sys.argv[1:] if argv is None else argv, app)
        if forwarded is not None:
            return forwarded
        code = app(args=argv, prog_name="spotrun", standalone_mode=False)
    except click_exceptions.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `spotrun`: the help is the answer
            err.print(exc.format_message(), markup=False)
        else:
            print_error(exc.format_message())
        return 2
    except click_exceptions.ClickException as exc:  # e.g. a file option that cannot be opened
        print_error(exc.format_message())
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):  # click turns a Ctrl-C into Abort
        return interrupted_early(sys.argv[1:] if argv is None else argv)
    except SpotrunError as exc:
        print_error(exc.user_message())
        return exc.exit_code
    return code if isinstance(code, int) else 0
