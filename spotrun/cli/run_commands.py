"""The commands on one run or all: ls, status, logs, attach, exec, stop."""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from spotrun.cli.common import print_error
from spotrun.cli.complete import complete_run
from spotrun.cli.follow_view import fmt_duration, fmt_metrics
from spotrun.cli.library import api
from spotrun.cli.recent import parse_since
from spotrun.cli.render import err, money, out, print_json
from spotrun.cli.run_list import show_runs, waiting_line
from spotrun.cli.ssh import require_terminal
from spotrun.core.capacity_note import show_note
from spotrun.core.display_words import shown_state
from spotrun.core.errors import UsageError
from spotrun.core.exitcodes import FAILURE
from spotrun.core.terminal_text import printable
from spotrun.core.waiting import pause
from spotrun.remote.sync import not_home
from spotrun.store.trial_marks import pruned_runs


def list_runs(
    all_: bool = typer.Option(
        False, "--all", "-a", help="every run, not only live and recent ones"
    ),
    as_json: bool = typer.Option(False, "--json", help="a JSON list of runs"),
    since: str | None = typer.Option(
        None, "--since", metavar="SPAN", help="ended runs of this span too (3d, 12h; default 1d)"
    ),
) -> None:
    """List runs: live ones and the most recent finished ones.

    Recent means ended in the last 24 hours (or --since); a footer counts the runs left out.

    \b
    Examples:
      spotrun ls
      spotrun ls --since 3d
      spotrun ls --all --json
    """
    if since is None:
        show_runs(all_, as_json)
    else:
        show_runs(all_, as_json, since_s=parse_since(since))


def status(
    run: str | None = typer.Argument(
        None,
        help="run name or a unique prefix of its id (default: list the runs, as ls)",
        autocompletion=complete_run,
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show one run: state history, instances, events, metrics, cost (no run: the runs).

    \b
    Examples:
      spotrun status
      spotrun status RUN
      spotrun status RUN --json
    """
    if run is None:  # as `sky status` does: the runs, live and recent
        show_runs(False, as_json)
        return
    ledger = api.open_ledger()
    st = api.run_status(ledger, run)
    summary = api.run_summary(ledger, st.run)
    missing = not_home(st.run.run_dir)  # files this machine could not write, and why
    if as_json:
        print_json(
            {
                **summary,
                "waiting_for_capacity": waiting_line(st.run.message),
                "supervised": st.supervised,
                "run_dir": str(st.run.run_dir),
                "plan": st.run.plan.to_dict() if st.run.plan else None,
                "transitions": [
                    {
                        "from": t.from_state.value if t.from_state else None,
                        "to": t.to_state.value,
                        "at": t.at,
                        "reason": t.reason,
                    }
                    for t in st.transitions
                ],
                "instances": [i.__dict__ for i in st.instances],
                "events": [e.__dict__ for e in st.events],
                "cost_lines": [c.__dict__ for c in st.cost_lines],
                "not_home": missing,
            }
        )
        return
    r = st.run
    command = r.job_command
    what = f"command {command!r}" if command else f"recipe {r.recipe}"
    out.print(f"{r.name} ({r.id})  {what}  on {r.cloud}", markup=False)
    said = f"  ({printable(show_note(r.message))})" if r.message else ""
    pruned = bool(r.sweep_id) and r.id in pruned_runs(ledger, [r.id])
    out.print(f"state     {shown_state(r.state.value, pruned=pruned)}{said}", markup=False)
    so_far = "" if r.is_terminal else " so far"
    shown = "? (no prices cached yet)" if st.cost_usd is None else money(st.cost_usd) + so_far
    out.print(f"duration  {fmt_duration(r.duration_s())}   cost {shown}")
    if r.last_metrics:
        out.print(f"metrics   {fmt_metrics(r.last_metrics)}")
    if summary.get("staging"):
        out.print(f"staging   {summary['staging']['line']}")
    if summary.get("device"):
        out.print(f"device    {summary['device']['line']}", markup=False)
    out.print(f"folder    {r.run_dir}")
    if missing:
        out.print(f"not home  {len(missing)} file(s) could not be written here:")
        for why in sorted(missing.values()):
            out.print(f"  {printable(why)}", markup=False)
    out.print("history:")
    for t in st.transitions:
        out.print(
            f"  {fmt_duration(t.at - r.created_at):>7}  {t.to_state.value:<13} {t.reason or ''}"
        )
    if st.instances:
        out.print("instances:")
        for i in st.instances:
            out.print(
                f"  {i.id}  {i.instance_type}  {i.zone}  {i.market}  {i.state}  {i.address or ''}"
            )
    # the device line above says the latest device report: not again among the events
    shown_events = [e for e in st.events if not (summary.get("device") and e.kind == "device")]
    if shown_events:
        out.print("events:")
        for e in shown_events[-10:]:
            out.print(f"  {fmt_duration(e.at - r.created_at):>7}  {e.kind}: {printable(e.message)}")


def logs(
    run: str = typer.Argument(
        ..., help="run name or a unique prefix of its id", autocompletion=complete_run
    ),
    follow: bool = typer.Option(False, "--follow", "-f", help="keep printing until the run ends"),
    node: str | None = typer.Option(
        None, "--node", help="a multi-node run's node number, or 'all' (default: node 0)"
    ),
    tail: int | None = typer.Option(
        None, "--tail", "-n", metavar="N", help="only the last N lines (then new ones, with -f)"
    ),
) -> None:
    """Print the job's output (what its tmux session shows).

    \b
    Examples:
      spotrun logs RUN
      spotrun logs -f RUN
      spotrun logs RUN --tail 20 -f
      spotrun logs RUN --node all
    """
    if tail is not None and tail < 0:
        raise UsageError(f"--tail must be 0 or more lines, got {tail}")
    ledger = api.open_ledger()
    try:
        for chunk in api.read_log(ledger, run, follow_log=follow, node=node, tail=tail):
            sys.stdout.write(chunk)
            sys.stdout.flush()
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def attach(
    run: str = typer.Argument(
        ..., help="run name or a unique prefix of its id", autocompletion=complete_run
    ),
    node: int = typer.Option(0, "--node", help="which node of a multi-node run"),
    read_only: bool = typer.Option(
        False, "--read-only", "-r", help="watch only: no key of yours reaches the job"
    ),
) -> None:
    """Put this terminal into the run's live tmux session (detach with Ctrl-b d).

    Ctrl-C there reaches the job and stops it (`spotrun resume` goes on from its newest
    checkpoint); --read-only only watches.

    \b
    Examples:
      spotrun attach RUN
      spotrun attach RUN --read-only
      spotrun attach RUN --node 1
    """
    ledger = api.open_ledger()
    argv = api.attach_command(ledger, run, node=node, read_only=read_only)
    require_terminal(run)  # tmux's own words would be "open terminal failed: not a terminal"
    # Said before tmux takes the screen; it is there again once the user detaches.
    sys.stderr.write(_leave_hint(ledger.resolve(run).name, read_only) + "\n")
    sys.stderr.flush()
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}  # allow attaching from inside tmux
    os.execvpe(argv[0], argv, env)


def _leave_hint(run_name: str, read_only: bool) -> str:
    """How to leave an attached session, and what Ctrl-C would do there."""
    leave = "leave with Ctrl-b d (tmux's detach key)"
    if read_only:
        return f"watching {run_name} read-only: {leave}; your keys do not reach the job"
    return (
        f"attaching to {run_name}: {leave}; Ctrl-C there reaches the job and stops it "
        f"(`spotrun attach {run_name} --read-only` only watches)"
    )


def exec_(
    run: str = typer.Argument(
        ..., help="run name or a unique prefix of its id", autocompletion=complete_run
    ),
    cmd: str = typer.Option(..., "--cmd", help="the command (bash), run in the job's folder"),
    detach: bool = typer.Option(False, "--detach", "-d", help="start it and return at once"),
) -> None:
    """Run another command on a live run's instance, in a new window of its tmux session.

    \b
    Examples:
      spotrun exec RUN --cmd "nvidia-smi"
      spotrun exec RUN --cmd "du -sh ." --detach
    """
    ledger = api.open_ledger()
    started = api.exec_command(ledger, run, cmd)
    err.print(f"{started.run.name}: running in tmux window {started.window}")
    if detach:
        return
    shown = 0
    while True:
        code, output = started.status()
        sys.stdout.write(output[shown:])
        sys.stdout.flush()
        shown = len(output)
        if code is not None:
            raise typer.Exit(code)
        pause(0.2)  # the window's output, read again


def stop(
    runs: list[str] = typer.Argument(
        None,
        metavar="RUN...",
        help="run names or unique prefixes of their ids",
        autocompletion=complete_run,
    ),
    all_: bool = typer.Option(False, "--all", help="every live run (asks first, unless --yes)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="stop --all without asking"),
) -> None:
    """Stop runs: each job checkpoints, results are synced, instances terminated.

    \b
    Examples:
      spotrun stop RUN
      spotrun stop RUN1 RUN2
      spotrun stop --all
    """
    ledger = api.open_ledger()
    targets = stop_targets(ledger, runs or [], all_=all_, yes=yes)
    ended = [t for t in targets if t.is_terminal]
    for target in ended:  # one line each, and nothing tried on them
        print_error(f"run {target.name} has already ended ({target.state.value}): nothing to stop")
    for target in targets:
        if target.is_terminal:
            continue
        err.print(f"stopping {target.name} ({target.id}) ...", markup=False)
        final = api.stop(ledger, target.id)
        out.print(f"{final.name} {final.state.value}", markup=False)
    if ended:
        raise typer.Exit(FAILURE)


def stop_targets(ledger: Any, refs: list[str], *, all_: bool, yes: bool) -> list[Any]:
    """The runs `stop` stops, every reference resolved before any is stopped (a typo stops
    nothing); --all asks first on a terminal, and refuses without one unless --yes."""
    if all_ and refs:
        raise UsageError("give runs or --all, not both")
    if not all_:
        if not refs:
            raise UsageError("stop what? give RUN... or --all", hint="`spotrun ls` lists runs")
        found = {run.id: run for run in (ledger.resolve(ref) for ref in refs)}
        return list(found.values())
    live = [run for run in ledger.list_runs(include_all=True) if not run.is_terminal]
    if not live:
        out.print("no live runs: nothing to stop")
        return []
    names = ", ".join(run.name for run in live)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(
                f"stop --all would stop {len(live)} live run(s) ({names}), and there is no "
                "terminal to ask on",
                hint="add --yes to stop them",
            )
        if not typer.confirm(f"stop {len(live)} live run(s): {names}?", err=True):
            err.print("nothing stopped")
            raise typer.Exit(FAILURE)
    return live
