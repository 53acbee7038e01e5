"""`spotrun ssh RUN`: a shell (or one command) on a run's instance, and what attach says when
there is no terminal to attach."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from spotrun.agent.session import session_name, tmux_argv
from spotrun.cloud import get_provider
from spotrun.cloud.capabilities import ReachableOverSsh
from spotrun.control import ssh_config
from spotrun.core.errors import StateError, UsageError
from spotrun.core.runstates import RunState
from spotrun.store.ledger import Ledger, RunRecord


@dataclass(frozen=True)
class Shell:
    run: RunRecord
    argv: list[str]
    cwd: Path | None  # where to start it (the local cloud: the run folder)
    note: str | None  # what the user should know before it starts


def shell_command(
    ledger: Ledger, ref: str, *, node: int = 0, command: str | None = None, tty: bool = True
) -> Shell:
    run = ledger.resolve(ref)
    nodes = run.spec.resources.nodes
    if not 0 <= node < nodes:
        raise UsageError(f"--node {node}: run {run.name} has nodes 0 to {nodes - 1}")
    if run.cloud == "local":
        # The local cloud's instance is this machine: a shell in the run's folder is the
        # closest thing to logging in to it.
        if not run.run_dir.is_dir():
            raise StateError(f"run {run.name}'s folder {run.run_dir} is gone")
        shell = os.environ.get("SHELL") or "/bin/bash"
        argv = [shell] if command is None else [shell, "-c", command]
        note = (
            f"run {run.name} is on the local cloud, whose instance is this machine: "
            f"{'a shell' if command is None else 'running it'} in its folder {run.run_dir}"
        )
        return Shell(run, argv, run.run_dir, note)
    if run.state is not RunState.RUNNING:
        raise StateError(
            f"run {run.name} is {run.state.value}; ssh reaches a running run's instance",
            hint="`spotrun ls` shows which runs are running",
        )
    provider = get_provider(run.cloud, ledger.settings)
    if not isinstance(provider, ReachableOverSsh):
        raise UsageError(f"the {run.cloud} cloud offers no ssh access to its instances")
    path = ssh_config.refresh(ledger)
    host = provider.live_ssh_host(run.id, node if nodes > 1 else None)
    name = ssh_config.alias(run, node)
    note = f"the same host is `ssh -F {path} {name}` (or `ssh {name}` with an Include of it)"
    return Shell(run, host.argv(tty=tty, command=command), None, note)


def no_terminal(ledger: Ledger, ref: str) -> UsageError:
    """What `attach` says when its input is not a terminal: where the session is, and what to
    do instead."""
    run = ledger.resolve(ref)
    session = session_name(run.id)
    if run.cloud == "local":
        where = f"on this machine (tmux server {tmux_argv()[-1]})"
        direct = f"`{' '.join(tmux_argv())} attach -t ={session}`"
    else:
        where = "on its instance"
        path = ssh_config.config_path(ledger)
        direct = f"`ssh -t -F {path} {ssh_config.alias(run)} tmux attach -t ={session}`"
    return UsageError(
        f"attach needs a terminal, and its input is not one: run {run.name}'s job runs in "
        f"tmux session {session} {where}",
        hint=f"run `spotrun attach {run.name}` (or {direct}) in a terminal; "
        f"without one, `spotrun logs {run.name} -f` follows its output",
    )
