"""The library surface of spotrun: what the CLI calls, and what scripts can call directly.

Every function takes the user's words (recipe names, run references) and returns typed
records; errors are SpotrunErrors with a message fit to show as is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from spotrun import supervisor
from spotrun.agent.session import session_exists, session_name, tmux_argv
from spotrun.agent.wrapper import LOG_FILE
from spotrun.cloud import get_provider
from spotrun.config import (
    CloudName,
    LaunchSpec,
    Resources,
    Settings,
    describe_validation_error,
    load_settings,
)
from spotrun.errors import StateError, UsageError
from spotrun.ledger import CostLine, InstanceRecord, Ledger, RunEvent, RunRecord, Transition
from spotrun.metrics import MetricsTail
from spotrun.plan import Plan, make_plan
from spotrun.recipes import Recipe, get_recipe, recipe_names
from spotrun.runs import RunState
from spotrun.waiting import WaitTimeout, wait_until


def open_ledger(settings: Settings | None = None, *, reconcile: bool = True) -> Ledger:
    """Open the ledger; by default also restart supervisors of live runs that lost theirs."""
    ledger = Ledger(settings or load_settings())
    if reconcile:
        supervisor.ensure_supervised(ledger)
    return ledger


# -------------------------------------------------------------------- launch
@dataclass(frozen=True)
class LaunchPlan:
    spec: LaunchSpec
    recipe: Recipe
    plan: Plan


def prepare_launch(
    settings: Settings,
    recipe_name: str,
    *,
    overrides: list[str] | None = None,
    cloud: CloudName | None = None,
    gpus: int | None = None,
    name: str | None = None,
    max_cost_usd: float | None = None,
    max_hours: float | None = None,
    resources: dict[str, Any] | None = None,
) -> LaunchPlan:
    """Validate everything a launch needs and choose offers; nothing is created."""
    if gpus is not None and gpus < 1:
        raise UsageError(
            f"--gpus must be a whole number of at least 1, got {gpus}",
            hint="leave it out to use the recipe's own GPU count",
        )
    recipe = get_recipe(recipe_name, overrides or [])
    update: dict[str, Any] = dict(resources or {})
    if gpus is not None:
        update["gpus"] = gpus
    try:
        merged = Resources.model_validate({**recipe.resources.model_dump(), **update})
        spec = LaunchSpec(
            recipe=recipe.name,
            overrides=list(overrides or []),
            resources=merged,
            name=name,
            cloud=cloud or settings.default_cloud,
            max_cost_usd=max_cost_usd if max_cost_usd is not None else settings.max_cost_usd,
            max_hours=max_hours,
        )
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc)) from exc
    if merged.nodes > 1 and not recipe.multi_node:
        raise UsageError(f"recipe {recipe.name} runs on one node only; drop --nodes")
    provider = get_provider(spec.cloud, settings)
    plan = make_plan(merged, provider.offers(merged))
    return LaunchPlan(spec, recipe, plan)


def launch(ledger: Ledger, prepared: LaunchPlan) -> RunRecord:
    """Record the run and hand it to a new supervisor; returns at once."""
    run = ledger.create_run(prepared.spec, plan=prepared.plan.to_dict())
    ledger.add_event(run.id, "plan", prepared.plan.reason)
    pid = supervisor.spawn(ledger.settings, run)
    ledger.set_supervisor(run.id, pid)
    return ledger.get_run(run.id)


@dataclass(frozen=True)
class Update:
    """One thing that happened to a run, for a follower to show."""

    kind: str  # "state", "metrics", "event", "end"
    at: float
    state: RunState
    text: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)


def follow(ledger: Ledger, run_id: str, *, poll_s: float = 0.25) -> Iterator[Update]:
    """Updates of a run as they happen, ending with one of kind "end"."""
    seen_transitions = 0
    seen_events = 0
    run = ledger.get_run(run_id)
    tail = MetricsTail(run.run_dir / "metrics.jsonl")
    while True:
        run = ledger.get_run(run_id)
        transitions = ledger.transitions(run_id)
        events = ledger.events(run_id)
        fresh = [
            Update("state", t.at, t.to_state, t.reason or "")
            for t in transitions[seen_transitions:]
        ] + [
            Update("event", e.at, run.state, f"{e.kind}: {e.message}") for e in events[seen_events:]
        ]
        yield from sorted(fresh, key=lambda u: u.at)
        seen_transitions, seen_events = len(transitions), len(events)
        for record in tail.read_new():
            yield Update("metrics", time.time(), run.state, metrics=record)
        if run.is_terminal:
            yield Update("end", run.ended_at or time.time(), run.state, run.message or "")
            return
        time.sleep(poll_s)


# -------------------------------------------------------------------- status
@dataclass(frozen=True)
class RunStatus:
    run: RunRecord
    transitions: list[Transition]
    instances: list[InstanceRecord]
    events: list[RunEvent]
    cost_lines: list[CostLine]
    cost_usd: float
    supervised: bool


def run_status(ledger: Ledger, ref: str) -> RunStatus:
    run = ledger.resolve(ref)
    return RunStatus(
        run=run,
        transitions=ledger.transitions(run.id),
        instances=ledger.instances(run.id),
        events=ledger.events(run.id),
        cost_lines=ledger.cost_lines(run.id),
        cost_usd=ledger.run_cost_usd(run.id),
        supervised=supervisor.is_supervised(run),
    )


def run_summary(ledger: Ledger, run: RunRecord) -> dict[str, Any]:
    """The machine-readable row of `ls --json` and the head of `status --json`."""
    return {
        "id": run.id,
        "name": run.name,
        "recipe": run.recipe,
        "cloud": run.cloud,
        "state": run.state.value,
        "created": _iso(run.created_at),
        "started": _iso(run.started_at),
        "ended": _iso(run.ended_at),
        "duration_s": round(run.duration_s(), 3),
        "cost_usd": round(ledger.run_cost_usd(run.id), 6),
        "metrics": run.last_metrics,
        "message": run.message,
        "sweep_id": run.sweep_id,
    }


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


# ---------------------------------------------------------------------- logs
def log_path(run: RunRecord) -> Path:
    return run.run_dir / LOG_FILE


def read_log(
    ledger: Ledger, ref: str, *, follow_log: bool = False, poll_s: float = 0.25
) -> Iterator[str]:
    """The job's output; with follow_log, keeps yielding new output until the run ends."""
    run = ledger.resolve(ref)
    path = log_path(run)
    offset = 0
    while True:
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except FileNotFoundError:
            data = b""
        if data:
            offset += len(data)
            yield data.decode(errors="replace")
        if not follow_log:
            return
        run = ledger.get_run(run.id)
        if run.is_terminal and not data:
            return
        time.sleep(poll_s)


# -------------------------------------------------------------------- attach
def attach_command(ledger: Ledger, ref: str) -> list[str]:
    """argv that puts this terminal into the run's tmux session."""
    run = ledger.resolve(ref)
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
    provider = get_provider(run.cloud, ledger.settings)
    attach = getattr(provider, "attach_command", None)
    if attach is not None:
        return list(attach(run.id))
    session = session_name(run.id)
    if not session_exists(session):
        raise StateError(f"run {run.name}'s tmux session {session} is gone")
    return [*tmux_argv(), "attach-session", "-t", f"={session}"]


# ---------------------------------------------------------------------- stop
def stop(ledger: Ledger, ref: str, *, timeout_s: float = 120.0) -> RunRecord:
    """Stop a run: checkpoint, sync, terminate, state stopped. Waits until it is done."""
    from spotrun.controller import RunController

    run = ledger.resolve(ref)
    if run.is_terminal:
        raise StateError(f"run {run.name} has already ended ({run.state.value})")
    ledger.request_stop(run.id)
    if supervisor.is_supervised(run):
        try:
            return wait_until(
                lambda: _ended(ledger, run.id), timeout_s=timeout_s, what=f"run {run.name} to stop"
            )
        except WaitTimeout:
            ledger.add_event(
                run.id,
                "stop",
                f"supervisor did not stop the run in {timeout_s:.0f} s; stopping it here",
            )
    return RunController(ledger, run.id).drive()


def _ended(ledger: Ledger, run_id: str) -> RunRecord | None:
    run = ledger.get_run(run_id)
    return run if run.is_terminal else None


# ---------------------------------------------------------------------- cost
def cost_rows(ledger: Ledger, ref: str | None = None) -> list[dict[str, Any]]:
    runs = [ledger.resolve(ref)] if ref else ledger.list_runs(include_all=True)
    rows = []
    for run in runs:
        lines = ledger.cost_lines(run.id)
        seconds = sum(line.quantity for line in lines if line.unit == "instance-s")
        rows.append(
            {
                "id": run.id,
                "name": run.name,
                "cloud": run.cloud,
                "state": run.state.value,
                "instance_hours": round(seconds / 3600, 6),
                "instance_seconds": round(seconds, 3),
                "cost_usd": round(sum(line.usd for line in lines), 6),
                "on_demand_usd": round(sum(line.on_demand_usd or 0.0 for line in lines), 6),
                "method": sorted({line.method for line in lines}),
            }
        )
    return rows


# ------------------------------------------------------------------- recipes
def recipes() -> list[Recipe]:
    return [get_recipe(name) for name in recipe_names()]
