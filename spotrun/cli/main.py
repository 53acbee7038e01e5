"""The `spotrun` command: the app, its commands in help's order, and the one way it exits.

Each command group lives in its own module here (launch, prices, run_commands, gc, cost,
recipes, data, training, sweep, remote, resume, ...); this module only registers them, in the
order `spotrun --help` lists them. No cloud SDKs here.
"""

from __future__ import annotations

import sys

import typer

from spotrun import __version__
from spotrun.cli import remote as remote_cli
from spotrun.cli import resume as resume_cli
from spotrun.cli.common import HELP_OPTIONS, interrupted_early, leave, print_error
from spotrun.cli.complete import completion, prepare_completion
from spotrun.cli.cost import GroupBy, cost
from spotrun.cli.data import data_app, data_ls, data_push
from spotrun.cli.doctor import doctor as doctor_command
from spotrun.cli.gc import gc_command
from spotrun.cli.launch import OwnJobFlags, launch
from spotrun.cli.library import api, supervisor
from spotrun.cli.notify import notify_app
from spotrun.cli.plot import plot as plot_command
from spotrun.cli.prices import prices
from spotrun.cli.recipes import methods, recipes_app, recipes_list, recipes_show
from spotrun.cli.render import err, out
from spotrun.cli.run_commands import attach, exec_, list_runs, logs, status, stop
from spotrun.cli.ssh import ssh as ssh_command
from spotrun.cli.sweep import sweep_app
from spotrun.cli.training import sample, train
from spotrun.cli.typer_app import SpotrunTyper
from spotrun.cli.ui import ui as ui_command
from spotrun.core.errors import SpotrunError
from spotrun.core.exitcodes import SUCCESS

try:  # typer >= 0.20 carries its own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

# what `from spotrun.cli.main import ...` has always found here
__all__ = [
    "GroupBy",
    "OwnJobFlags",
    "api",
    "app",
    "attach",
    "cost",
    "data_app",
    "data_ls",
    "data_push",
    "err",
    "exec_",
    "gc_command",
    "launch",
    "list_runs",
    "logs",
    "main",
    "methods",
    "out",
    "prices",
    "recipes_app",
    "recipes_list",
    "recipes_show",
    "sample",
    "status",
    "stop",
    "supervisor",
    "train",
]

app = SpotrunTyper(
    name="spotrun",
    no_args_is_help=True,
    # `spotrun completion SHELL` instead of typer's --install-completion: typer's root options
    # would cost every subcommand a pydantic import (their None defaults get coerced)
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=HELP_OPTIONS,  # every subcommand inherits -h from here
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


# The order here is the order of `spotrun --help` (typer lists commands as registered, then
# the groups): keep it when adding one.
app.add_typer(recipes_app, name="recipes")  # spotrun/cli/recipes.py
app.add_typer(sweep_app, name="sweep")  # spotrun/cli/sweep.py
app.add_typer(data_app, name="data")  # spotrun/cli/data.py
app.add_typer(notify_app, name="notify")  # spotrun/cli/notify.py
app.command("completion")(completion)  # spotrun/cli/complete.py
app.command("doctor")(doctor_command)  # spotrun/cli/doctor.py
app.command("plot")(plot_command)  # spotrun/cli/plot.py
app.command("ssh")(ssh_command)  # spotrun/cli/ssh.py
app.command("ui")(ui_command)  # spotrun/cli/ui.py
app.command("resume")(resume_cli.resume)  # spotrun/cli/resume.py
app.command("rm")(resume_cli.rm)
app.add_typer(remote_cli.controller_app, name="controller")  # spotrun/cli/remote.py
app.command("pull")(remote_cli.pull)
app.command()(launch)  # spotrun/cli/launch.py
app.command()(prices)  # spotrun/cli/prices.py
app.command("ls")(list_runs)  # spotrun/cli/run_commands.py
app.command()(status)
app.command()(logs)
app.command()(attach)
app.command("exec")(exec_)
app.command()(stop)
app.command("gc")(gc_command)  # spotrun/cli/gc.py
app.command()(cost)  # spotrun/cli/cost.py
app.command()(methods)  # spotrun/cli/recipes.py
app.command()(train)  # spotrun/cli/training.py
app.command()(sample)


# ---------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    code = _run(argv)
    if argv is None:  # the program itself: everything it wrote is committed or flushed
        leave(code)
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    prepare_completion()
    try:
        # a controller on another host carries out the run commands (spotrun/cli/remote.py)
        forwarded = remote_cli.forward_if_remote(sys.argv[1:] if argv is None else argv, app)
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
