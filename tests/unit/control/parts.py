"""What the tests of the controller's parts share: a real ledger's run and its instances."""

from __future__ import annotations

from spotrun.cloud.base import Instance
from spotrun.core.runstates import RunState
from spotrun.store.ledger import Ledger, RunRecord


def instance(instance_id: str, run_id: str, state: str = "running", **more: object) -> Instance:
    return Instance(
        instance_id,
        run_id,
        "aws",
        "c6i.large",
        "us-east-1",
        "us-east-1a",
        "spot",
        state,
        **more,  # type: ignore[arg-type]
    )


def running(ledger: Ledger, run_id: str) -> RunRecord:
    """The run moved along its states to running, as a controller moves it."""
    for state in (
        RunState.REQUESTED,
        RunState.PROVISIONING,
        RunState.BOOTSTRAPPING,
        RunState.RUNNING,
    ):
        run = ledger.transition(run_id, state, "the test moves it")
    return run
