"""Reaching a live run's job: `spotrun attach` (its tmux session) and `spotrun exec` (a command
in a new window beside it)."""

from __future__ import annotations

from dataclasses import dataclass

from spotrun.agent.session import session_exists, session_name, tmux_argv
from spotrun.cloud import get_provider
from spotrun.cloud.capabilities import AttachesOverSsh
from spotrun.core.errors import StateError, UsageError
from spotrun.core.runstates import RunState
from spotrun.remote.job import JobDriver
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.sweep.packs import run_provider

# tmux's own: a read-only client's keys reach nothing but tmux's detach and switch bindings
READ_ONLY_FLAG = "-r"


def attach_command(ledger: Ledger, ref: str, node: int = 0, read_only: bool = False) -> list[str]:
    """argv that puts this terminal into the run's tmux session (on node `node`), as a
    read-only client when `read_only`."""
    run = ledger.resolve(ref)
    nodes = run.spec.resources.nodes
    if not 0 <= node < nodes:
        raise UsageError(f"--node {node}: run {run.name} has nodes 0 to {nodes - 1}")
    if run.is_terminal:
        raise StateError(
            f"run {run.name} has ended ({run.state.value}); its tmux session is gone",
            hint=f"read its output with `spotrun logs {run.name}`",
        )
    if run.state is not RunState.RUNNING:
        raise StateError(
            f"run {run.name} is {run.state.value}; its job has not started yet",
            hint="try again in a moment, or follow it with `spotrun logs -f`",
        )
    provider = run_provider(ledger, run)  # a packed sweep trial attaches through its pack
    only = [READ_ONLY_FLAG] if read_only else []
    if isinstance(provider, AttachesOverSsh):
        argv = list(provider.attach_command(run.id, node=node if nodes > 1 else None))
        if read_only:  # the last word is the remote `tmux attach-session ...` command line
            argv[-1] = f"{argv[-1]} {READ_ONLY_FLAG}"
        return argv
    session = session_name(run.id)
    if not session_exists(session):
        raise StateError(f"run {run.name}'s tmux session {session} is gone")
    return [*tmux_argv(), "attach-session", *only, "-t", f"={session}"]


@dataclass(frozen=True)
class ExecWindow:
    """A command `exec` started in a new window of a live run's tmux session."""

    run: RunRecord
    window: str
    driver: JobDriver

    def status(self) -> tuple[int | None, str]:
        """Its exit code (None while it runs) and its output so far."""
        return self.driver.exec_status(self.window)


def exec_command(ledger: Ledger, ref: str, command: str) -> ExecWindow:
    """Run `command` beside a live run's job, in a new window of its tmux session."""
    if not command.strip():
        raise UsageError("the command is empty: nothing to run", hint='e.g. --cmd "nvidia-smi"')
    run = ledger.resolve(ref)
    if run.state is not RunState.RUNNING:
        raise StateError(
            f"run {run.name} is {run.state.value}; exec needs a running job",
            hint="`spotrun ls` shows which runs are running",
        )
    provider = get_provider(run.cloud, ledger.settings)
    live = [i for i in provider.describe(run.id) if i.is_live]
    if not live:
        raise StateError(f"run {run.name} has no live instance")
    head = live[0]
    driver = JobDriver(
        provider.runner(head),
        provider.spotrun_command(head),
        provider.run_dir(head, run.id),
        session_name(run.id),
    )
    return ExecWindow(run, driver.exec(command), driver)
