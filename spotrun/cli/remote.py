"""`spotrun controller up|status|down` and `spotrun pull RUN` (run commands forwarded to the
controller's host: spotrun/cli/forwarding.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import typer
import typer.main

from spotrun.cli.common import print_error
from spotrun.cli.complete import complete_run
from spotrun.cli.lazy import stderr_console, stdout_console
from spotrun.cli.typer_app import SpotrunTyper
from spotrun.core.config import Settings, load_settings
from spotrun.core.durations import format_duration, parse_duration
from spotrun.core.errors import UsageError
from spotrun.core.home import default_home
from spotrun.core.money import show_usd, show_usd_per_hour
from spotrun.core.rundir import HOME_VAR
from spotrun.remote_controller import idle_marks
from spotrun.remote_controller.lifecycle import controller_down, controller_status, controller_up
from spotrun.remote_controller.pull import PullPlan, pull_run

out = stdout_console()
err = stderr_console()

controller_app = SpotrunTyper(
    help="Where this home's controller lives: this machine, or an always-on host of yours.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _settings() -> Settings:
    return load_settings()


def _note(line: str) -> None:
    err.print(line, markup=False)


@controller_app.command("up")
def up(
    on: str = typer.Option(
        ..., "--on", metavar="ssh://[USER@]HOST[:PORT]|aws", help="the host, or aws"
    ),
    key: Path | None = typer.Option(None, "--key", help="the SSH private key for the host"),
    python: str | None = typer.Option(
        None, "--python", help="the host's python (3.10+; default python3, aws.python on aws)"
    ),
    home: str | None = typer.Option(
        None, "--home", help=f"{HOME_VAR} on the host (default ~/.spotrun there)"
    ),
    region: str | None = typer.Option(None, "--region", help="--on aws: region (aws.region)"),
    instance_type: str | None = typer.Option(
        None, "--instance-type", help="--on aws: type (default the cheapest with 2 vCPU, 2 GiB)"
    ),
    idle_stop: str | None = typer.Option(
        None,
        "--idle-stop",
        metavar="DURATION|never",
        help="--on aws: the instance stops itself after this long idle (90s, 30m, 2h, never; "
        "default aws.controller_idle_stop_s); the next command starts it",
    ),
) -> None:
    """Move this home's controller to an always-on host: from then on launch, sweep, ls,
    status, logs, attach, exec, stop, cost ... run there, and the laptop can close.

    The host needs Python 3.10+ with spotrun's dependencies, and AWS credentials or an
    instance role of its own: no credentials of this machine are copied, only config.toml.
    `--on aws` starts an on-demand instance for it (tagged, with the instance profile
    aws.controller_instance_profile, whose role holds the run permissions); it stops itself
    when nothing is live and no command came for --idle-stop (its volume keeps everything),
    the next command starts it again; `controller down` terminates it.

    \b
    Examples:
      spotrun controller up --on ssh://me@box.example.org
      spotrun controller up --on ssh://10.0.0.5:2222 --key ~/.ssh/box --python /opt/py/bin/python3
      spotrun controller up --on aws --region eu-west-1 --idle-stop 2h
    """
    idle_stop_s = None
    if idle_stop is not None:
        if on != "aws":
            raise UsageError(
                "--idle-stop is for --on aws: a host of yours is not spotrun's to stop"
            )
        idle_stop_s = parse_duration(idle_stop, what="--idle-stop")
    result = controller_up(
        _settings(),
        on,
        key_file=key,
        python=python,
        remote_home=home,
        region=region,
        instance_type=instance_type,
        idle_stop_s=idle_stop_s,
        log=_note,
    )
    record = result.record
    out.print(f"controller: {record.where}, {HOME_VAR} {record.home} there", markup=False)
    if record.kind == "aws":
        price = (
            f"{show_usd_per_hour(record.usd_per_hour)} on demand" if record.usd_per_hour else "?"
        )
        out.print(
            f"instance    {record.instance_id} ({record.instance_type}, {record.region}, {price})",
            markup=False,
        )
        out.print(f"idle stop   {_idle_words(record.idle_stop_s)}", markup=False)
    out.print(
        f"spotrun {record.version} in {record.code_dir}"
        + (" (pushed now)" if result.pushed_code else " (already there)"),
        markup=False,
    )
    out.print(
        "AWS: the host's own credentials or instance role are used; none were copied"
        + ("; config.toml was" if result.copied_config else ""),
        markup=False,
    )
    if result.restarted_pid is not None:
        out.print(f"restarted the controller there (was pid {result.restarted_pid}) with this code")
    out.print(f"recorded in {result.record_path}; `spotrun controller down` undoes it")


@controller_app.command("status")
def status(as_json: bool = typer.Option(False, "--json", help="as JSON")) -> None:
    """Where the controller lives, whether it answers, its pid, what it drives, its version.

    \b
    Examples:
      spotrun controller status
      spotrun controller status --json
    """
    st = controller_status(_settings())
    if as_json:
        sys.stdout.write(json.dumps(st.to_dict(), indent=2) + "\n")
    else:
        out.print(f"controller  {st.where}  ({HOME_VAR} {st.home})", markup=False)
        out.print(f"reachable   {'yes' if st.reachable else 'no'}", markup=False)
        out.print(f"process     {'pid ' + str(st.pid) if st.pid else 'not running (nothing live)'}")
        out.print(f"live runs   {', '.join(st.live_runs) or '-'}", markup=False)
        out.print(f"live sweeps {', '.join(st.live_sweeps) or '-'}", markup=False)
        if st.instance_id:
            cost = show_usd(st.usd) if st.usd is not None else "$? (no price known)"
            out.print(
                f"instance    {st.instance_id} ({st.instance_type}): up {st.hours or 0:.3f} h, "
                f"{cost} on demand so far",
                markup=False,
            )
            out.print(f"state       {_state_words(st)}", markup=False)
            if st.idle_error:
                out.print(
                    f"idle stop   FAILED: {st.idle_error} (the role needs the README's "
                    "controller policy: ec2:StopInstances on itself)",
                    markup=False,
                )
        same = st.version_there == st.version_here
        there = st.version_there or "?"
        out.print(
            f"version     {there} there, {st.version_here} here"
            + ("" if same else "  (differ: `spotrun controller up` again updates it)"),
            markup=False,
        )
    if st.problem:
        print_error(st.problem)
        raise typer.Exit(1)


def _idle_words(idle_stop_s: float | None) -> str:
    if not idle_stop_s:
        return "never (it bills until `spotrun controller down`)"
    return f"after {format_duration(idle_stop_s)} idle (the next command starts it again)"


def _clock(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def _state_words(st: Any) -> str:
    if st.instance_state in ("stopped", "stopping"):
        since = f" (idle) since {_clock(st.stopped_since)}" if st.stopped_since else " (idle)"
        return f"{st.instance_state}{since}; the next command starts it (~1 min)"
    words = st.instance_state or "?"
    if st.stops_in_s is None:
        return f"{words}; idle stop {_idle_words(st.idle_stop_s)}"
    if st.idle_since is None:
        return f"{words}; something is live: no idle stop while it is"
    whole = int(st.stops_in_s)
    minutes, seconds = divmod(whole, 60)
    left = f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s" if whole else "now"
    return f"{words}; idle since {_clock(st.idle_since)}, stops itself in {left}"


@controller_app.command("idle-stop", hidden=True)
def idle_stop_command(
    instance_id: str = typer.Option(..., "--instance-id"),
    region: str = typer.Option(..., "--region"),
    after: float = typer.Option(..., "--after", help="seconds idle; 0: never"),
) -> None:
    """On the controller instance (run there by `controller up --on aws`): stop this instance
    after AFTER seconds with nothing live and no command; the watcher that does it runs."""
    home = default_home()
    idle_marks.write_config(home, idle_marks.IdleConfig(instance_id, region, after))
    pid = idle_marks.ensure_watcher(home) if after > 0 else None
    sys.stdout.write(json.dumps({"idle_stop_s": after, "watcher_pid": pid}) + "\n")


@controller_app.command("down")
def down(
    force: bool = typer.Option(False, "--force", help="stop every live run and sweep first"),
    as_json: bool = typer.Option(False, "--json", help="as JSON"),
) -> None:
    """End the controller (refused while runs or sweeps are live, unless --force, which stops
    them so nothing keeps billing); a remote one is forgotten, and the controller lives here
    again.

    \b
    Examples:
      spotrun controller down
      spotrun controller down --force
    """
    result = controller_down(_settings(), force=force, log=_note)
    if as_json:
        sys.stdout.write(
            json.dumps(
                {
                    "where": result.where,
                    "stopped": result.stopped,
                    "controller_pid": result.controller_pid,
                    "forgot": result.forgot,
                }
            )
            + "\n"
        )
        return
    for name in result.stopped:
        out.print(f"stopped {name}", markup=False)
    pid = f" (pid {result.controller_pid})" if result.controller_pid else ""
    out.print(f"controller on {result.where}{pid} ended", markup=False)
    if result.forgot:
        out.print("forgot the remote controller: the controller lives on this machine again")


def pull(
    run: str = typer.Argument(..., help="run name or id prefix", autocompletion=complete_run),
    to: Path | None = typer.Option(None, "--to", help=f"where (default {HOME_VAR}/runs/ID)"),
) -> None:
    """Bring a run's folder (metrics, logs, checkpoints, outputs) from the controller host to
    this machine; run it again and only what changed moves.

    \b
    Examples:
      spotrun pull RUN
      spotrun pull RUN --to ./results
    """

    def plan(p: PullPlan) -> None:
        err.print(f"{p.files} files, {p.bytes / 1e6:.1f} MB in the run folder there", markup=False)

    def arrived(path: str, size: int) -> None:
        err.print(f"  {path}  {size:,} bytes", markup=False)

    pulled = pull_run(_settings(), run, to=to, on_plan=plan, on_file=arrived, log=_note)
    if pulled.already_here:
        out.print(f"{pulled.name} is already here: {pulled.folder}", markup=False)
        return
    out.print(
        f"{pulled.name} ({pulled.run_id}, {pulled.state}): {pulled.files} files "
        f"({pulled.bytes / 1e6:.1f} MB) brought, {pulled.unchanged} unchanged, in {pulled.folder}",
        markup=False,
    )
