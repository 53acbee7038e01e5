"""Reopening (resume) and forgetting (rm) runs in a real ledger file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotrun.cloud.base import Plan
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.errors import StateError
from spotrun.core.runstates import RunState
from spotrun.store.ledger import CostLine, Ledger
from spotrun.store.runs_admin import forget_run, reopen_run


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(load_settings(tmp_path / "home"))


def _ended(ledger: Ledger, state: RunState, name: str) -> str:
    run = ledger.create_run(LaunchSpec(recipe="digits-fast", name=name))
    ledger.transition(run.id, RunState.REQUESTED)
    ledger.request_stop(run.id, "budget: $1.00 cap")
    ledger.transition(run.id, state, "budget: $1.00 cap")
    return run.id


def test_reopen_keeps_the_run_and_takes_the_new_spec(ledger: Ledger) -> None:
    run_id = _ended(ledger, RunState.STOPPED, "capped")
    ledger.add_event(run_id, "budget", "stopping")
    spec = ledger.get_run(run_id).spec.model_copy(update={"max_cost_usd": 5.0})
    reopened = reopen_run(ledger, run_id, spec, Plan([], "none"), "resume after stopped")
    assert (reopened.id, reopened.name, reopened.state) == (run_id, "capped", RunState.PLANNED)
    assert reopened.spec.max_cost_usd == 5.0 and reopened.plan == Plan([], "none")
    assert not reopened.stop_requested and reopened.ended_at is None and reopened.message is None
    moves = [(t.from_state, t.to_state) for t in ledger.transitions(run_id)]
    assert moves[-1] == (RunState.STOPPED, RunState.PLANNED)
    assert [e.kind for e in ledger.events(run_id)] == ["budget"]  # the history stays
    ledger.transition(run_id, RunState.REQUESTED)  # and the run moves on as any other


def test_only_stopped_or_failed_runs_reopen(ledger: Ledger) -> None:
    done = ledger.create_run(LaunchSpec(recipe="digits-fast"))
    for state in (RunState.REQUESTED, RunState.PROVISIONING, RunState.RUNNING, RunState.SYNCING):
        ledger.transition(done.id, state)
        with pytest.raises(StateError, match="only a stopped or failed run resumes"):
            reopen_run(ledger, done.id, done.spec, Plan([], ""), "resume")
    ledger.transition(done.id, RunState.SUCCEEDED)
    with pytest.raises(StateError, match="succeeded"):
        reopen_run(ledger, done.id, done.spec, Plan([], ""), "resume")
    failed = _ended(ledger, RunState.FAILED, "broke")
    assert reopen_run(ledger, failed, done.spec, Plan([], ""), "resume").state is RunState.PLANNED


def test_forget_deletes_every_row_of_an_ended_run_only(ledger: Ledger) -> None:
    gone = _ended(ledger, RunState.STOPPED, "old")
    kept = ledger.create_run(LaunchSpec(recipe="digits-fast", name="live"))
    for run_id in (gone, kept.id):
        ledger.add_event(run_id, "job", "started")
        ledger.replace_cost_lines(
            run_id, [CostLine(run_id, "compute", 1.0, "instance-s", 0.0, "m")]
        )
    with pytest.raises(StateError, match="only an ended run"):
        forget_run(ledger, kept.id)
    forget_run(ledger, gone)
    assert [r.id for r in ledger.list_runs()] == [kept.id]
    assert ledger.events(gone) == [] and ledger.transitions(gone) == []
    assert ledger.cost_lines(gone) == [] and len(ledger.cost_lines(kept.id)) == 1
    forget_run(ledger, gone)  # again: nothing left, nothing to do


def test_plans_stored_by_older_versions_read_back_typed(ledger: Ledger) -> None:
    """A plan is stored as JSON; one written before an Offer field existed (cluster_placement,
    efa came with multi-node runs), or by a newer spotrun with a field this one does not know,
    still reads back as a Plan of Offers."""
    run = ledger.create_run(LaunchSpec(recipe="digits-fast", name="old"))
    stored = {
        "reason": "cheapest of 1 fitting offer(s)",
        "offers": [
            {
                "provider": "aws",
                "instance_type": "g5.xlarge",
                "region": "us-east-1",
                "zone": "us-east-1a",
                "gpus": 1,
                "gpu_model": "A10G",
                "gpu_memory_gb": 24.0,
                "vcpus": 4,
                "memory_gb": 16.0,
                "spot_usd_per_hour": 0.4,
                "on_demand_usd_per_hour": 1.006,
                "market": "spot",
                "capacity_hint": "from a newer spotrun",
            }
        ],
    }
    ledger.db.execute("UPDATE runs SET plan_json = ? WHERE id = ?", (json.dumps(stored), run.id))
    plan = ledger.get_run(run.id).plan
    assert isinstance(plan, Plan) and plan.reason == stored["reason"]
    offer = plan.offer_of("g5.xlarge", "us-east-1a")
    assert offer is not None and plan.chosen == offer
    assert (offer.gpus, offer.spot_usd_per_hour, offer.efa, offer.cluster_placement) == (
        1,
        0.4,
        False,
        True,
    )
    assert plan.offer_of("g5.xlarge", "us-east-1b") is None
    assert Plan.from_dict(plan.to_dict()) == plan
