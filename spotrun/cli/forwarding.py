"""Run commands carried out on the controller host when this home's controller lives on another
machine (`spotrun controller up`): spotrun/cli/main.py asks here before any command runs, so
this module stays light; the forwarding itself (spotrun.remote_controller.forward) loads
only then."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
import typer.main

from spotrun.cli.common import print_error
from spotrun.cli.library import load_settings
from spotrun.cli.render import err, out
from spotrun.core.errors import UsageError
from spotrun.core.home import IDLE_STOP_FILE, default_home
from spotrun.core.lazy import lazy_module
from spotrun.core.money import show_usd
from spotrun.remote_controller.record import load_record

if TYPE_CHECKING:
    from spotrun.remote_controller import connection as host_link
    from spotrun.remote_controller import forward, idle_marks
    from spotrun.remote_controller import wake as controller_wake
else:  # every command passes here: the ssh forwarding (~11 ms) and the controller instance's
    # wake (pydantic, the bills: ~65 ms) load only for a controller on another host
    host_link = lazy_module("spotrun.remote_controller.connection")
    controller_wake = lazy_module("spotrun.remote_controller.wake")
    forward = lazy_module("spotrun.remote_controller.forward")
    idle_marks = lazy_module("spotrun.remote_controller.idle_marks")


def _note(line: str) -> None:
    err.print(line, markup=False)


def forward_if_remote(args: list[str], app: Any) -> int | None:
    """Run `spotrun ARGS` on the controller host when this home has one; None otherwise."""
    if not args:
        return None
    home = default_home()
    record = load_record(home)  # one stat when there is none
    if record is None:
        if (home / IDLE_STOP_FILE).exists():  # on a controller instance: a use; its watcher
            idle_marks.note_command(home, args)
        return None
    if args[0] not in forward.FORWARDED and args[0] not in forward.NOT_CARRIED:
        return None
    why = forward.refusal(args)
    if why is not None:
        raise UsageError(f"{why} (the controller lives on {record.where})")
    if not forward.wants_forwarding(args):
        return None  # help: the same here
    if record.kind == "aws":
        record = _awake(home, record)
    if args[0] == "launch":
        args = forward.stage_launch(
            home,
            record,
            args,
            _valued_options(app, "launch"),
            workdir_max_mb=load_settings().workdir_max_mb,
            log=_note,
        )
    starts_jobs = args[0] == "launch" or (
        args[0] == "sweep" and (len(args) < 2 or args[1] == "run" or args[1] not in _SWEEP_OTHERS)
    )
    if starts_jobs:
        command = args[0] if args[0] == "launch" else "sweep run"
        args = forward.stage_job_env(home, record, args, _valued_options(app, command), log=_note)
    code = forward.forward(home, record, args)
    if code == 255 and record.kind == "aws" and _stopped_meanwhile(record):
        # it stopped itself (idle) as this command came: a question is asked again, once
        if args[0] not in _ASKED_AGAIN:
            print_error(
                f"the controller instance {record.instance_id} stopped (idle) as this command "
                "came; run it again (it is started then)"
            )
            return code
        record = controller_wake.wake(load_settings(), record, log=_note)
        code = forward.forward(home, record, args)
    if args[0] == "cost" and code == 0 and not {"--json", "--csv"} & set(args):
        _controller_cost_line(record)
    if code == 255:
        print_error(
            f"ssh to the controller host {record.where} failed (above); "
            "`spotrun controller status` says whether it answers"
        )
    return code


# Commands that only read: asked again when the instance stopped under them.
_ASKED_AGAIN = frozenset({"ls", "status", "cost"})


def _stopped_meanwhile(record: Any) -> bool:
    return controller_wake.is_stopped(load_settings(), record)


def _awake(home: Path, record: Any) -> Any:
    """The controller instance's record once it answers: when the shared connection cannot
    be made, EC2 is asked, and a stopped instance is started (one line on stderr)."""
    if host_link.ensure_shared_connection(home, record):
        return record  # it answers: no AWS call (nor boto3's import) on a command's way
    return controller_wake.wake(load_settings(), record, log=_note)


def _controller_cost_line(record: Any) -> None:
    """`spotrun cost` under `--on aws`: the controller instance's own bill, which no run's
    rows hold: its running hours at the on-demand list price (none while it was stopped) and
    its root volume for all the time since `controller up`."""
    if record.kind != "aws":
        return
    bill = controller_wake.bill_of(record)
    hours = bill.running_s / 3600
    compute = show_usd(bill.compute_usd) if bill.compute_usd is not None else "$?"
    storage = show_usd(bill.storage_usd) if bill.storage_usd is not None else "$?"
    stopped = f", stopped {bill.stopped_s / 3600:.3f} h" if bill.stopped_s >= 1 else ""
    out.print(
        f"controller instance {record.instance_id} ({record.instance_type}, on demand): "
        f"{hours:.3f} h running{stopped}, {compute} + EBS {bill.disk_gb} GB gp3 {storage} "
        "so far (not in the rows above)",
        markup=False,
    )


# `spotrun sweep` subcommands other than `run` (a bare `spotrun sweep RECIPE` runs one)
_SWEEP_OTHERS = frozenset({"ls", "status", "leaderboard", "stop", "-h", "--help"})


def _valued_options(app: Any, name: str) -> set[str]:
    """The options of command `name` ("launch", "sweep run") that take a value (from click's
    own definition; typer may carry its own copy of click, so the objects are read by their
    attributes)."""
    sub = typer.main.get_command(app)
    for word in name.split():
        sub = sub.commands[word]  # type: ignore[attr-defined]
    return {
        opt
        for param in sub.params
        if param.param_type_name == "option" and not getattr(param, "is_flag", False)
        for opt in param.opts
    }
