"""Recovery's waits, on a clock the test moves: an instance that does not answer is retried
until run.unreachable_s, then replaced; nodes that stay silent are found without real waits."""

from __future__ import annotations

from pathlib import Path

from spotrun.cloud.base import InstanceRequest
from spotrun.cloud.local import LocalProvider
from spotrun.control.recovery import Recovery
from spotrun.core.config import LaunchSpec, Resources, load_settings
from spotrun.core.errors import RemoteCommandError, RemoteError
from spotrun.core.runstates import RunState
from spotrun.core.waiting import ManualClock
from spotrun.store.ledger import Ledger
from tests.unit.control.parts import instance, running


def test_an_unanswering_instance_is_retried_until_the_bound_then_replaced(
    tmp_path: Path,
) -> None:
    settings = load_settings(tmp_path)
    with Ledger(settings) as ledger:
        run = running(ledger, ledger.create_run(LaunchSpec(recipe="digits-fast")).id)
        clock = ManualClock()
        recovery = Recovery(ledger, LocalProvider(settings), run.id, clock=clock)
        retry_s = min(settings.aws.poll_s, 2.0)
        run = recovery.unanswered(run, RemoteError("ssh: timed out"))
        assert run.state is RunState.RUNNING and clock.slept == [retry_s]
        clock.advance(settings.run.unreachable_s - retry_s - 1)
        run = recovery.unanswered(run, RemoteError("ssh: timed out"))
        assert run.state is RunState.RUNNING  # not yet: the step is tried again
        remote = [e.message for e in ledger.events(run.id) if e.kind == "remote"]
        assert remote == ["instance not answering: ssh: timed out"]  # said once
        recovery.answered()  # it answered meanwhile: the bound starts again
        clock.advance(settings.run.unreachable_s)
        assert recovery.unanswered(run, RemoteError("again")).state is RunState.RUNNING
        clock.advance(settings.run.unreachable_s)
        run = recovery.unanswered(run, RemoteError("again"))
        assert run.state is RunState.INTERRUPTED
        why = ledger.transitions(run.id)[-1].reason
        assert why == f"the instance did not answer for {settings.run.unreachable_s:.0f} s"


def test_silent_nodes_are_those_that_never_answer_within_the_bound(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    with Ledger(settings) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast"))
        clock = ManualClock()
        recovery = Recovery(ledger, LocalProvider(settings), run.id, clock=clock)
        # The local cloud's runner is this machine's shell: a node there always answers.
        assert recovery.silent_nodes([instance("i-a", run.id)]) == []
        assert clock.slept == []


def test_an_instance_whose_commands_keep_failing_is_replaced_with_that_reason(
    tmp_path: Path,
) -> None:
    """It answers (a command's exit code came back): the event and the reason say its commands
    failed, never that it was silent."""
    settings = load_settings(tmp_path)
    provider = LocalProvider(settings)
    with Ledger(settings) as ledger:
        run = running(ledger, ledger.create_run(LaunchSpec(recipe="digits-fast")).id)
        (offer,) = provider.offers(Resources(gpus=0))
        (live,) = provider.launch(InstanceRequest(run_id=run.id, offer=offer))
        clock = ManualClock()
        recovery = Recovery(ledger, provider, run.id, clock=clock)
        failed = RemoteCommandError("find: exited 1")
        assert recovery.unanswered(run, failed).state is RunState.RUNNING  # tried again
        clock.advance(settings.run.unreachable_s)
        run = recovery.unanswered(run, failed)
        assert run.state is RunState.INTERRUPTED
        remote = [e.message for e in ledger.events(run.id) if e.kind == "remote"]
        assert remote == ["a command on the instance failed: find: exited 1"]
        why = ledger.transitions(run.id)[-1].reason
        limit = f"{settings.run.unreachable_s:.0f}"
        assert why == f"{live.id} its commands kept failing for {limit} s (last: find: exited 1)"
        assert not any(i.is_live for i in provider.describe(run.id))
