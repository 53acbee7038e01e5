"""The library surface of sweeps: prepare (validate and plan, nothing created), start, stop.

`spotrun sweep ...` calls these; scripts can too.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import ValidationError

from spotrun.cloud import get_provider
from spotrun.core.config import CloudName, Settings, describe_validation_error
from spotrun.core.errors import StateError, UsageError
from spotrun.core.launch_request import LaunchRequest
from spotrun.core.rundir import SUPERVISOR_LOG_FILE
from spotrun.core.waiting import Backoff, WaitTimeout, wait_until
from spotrun.drive import revive
from spotrun.recipes import check_recipe, get_recipe
from spotrun.service.prepare import check_launchable, check_multi_node, check_nodes
from spotrun.store.ledger import Ledger
from spotrun.store.sweep_spec import MODEL_SEARCHES, SweepSpec
from spotrun.store.sweeps import SweepRecord, SweepState, SweepStore, TrialStatus
from spotrun.sweep.planner import SweepPlan, plan_sweep
from spotrun.sweep.space import check_trials, overrides_of, trial_params, typed_space
from spotrun.sweep.spec import (
    check_metric,
    check_pbt_options,
    check_search,
    parse_grid,
    parse_space,
)


@dataclass(frozen=True)
class PreparedSweep:
    spec: SweepSpec
    trials: list[dict[str, str]]
    plan: SweepPlan
    notes: list[str]  # what was adjusted, to tell the user


def prepare_sweep(
    settings: Settings,
    recipe_name: str,
    request: LaunchRequest | None = None,
    *,
    grid: list[str] | None = None,
    space: list[str] | None = None,
    random: int | None = None,
    overrides: list[str] | None = None,
    max_parallel: int | None = None,
    gpus_per_trial: int | None = None,
    early_stop: str = "none",
    metric: str | None = None,
    mode: str | None = None,
    seed: int = 0,
    grace_epochs: int = 1,
    reduction_factor: int = 3,
    envs: dict[str, str] | None = None,
    search: str | None = None,
    search_trials: int | None = None,
    pbt_interval: int | None = None,
    pbt_perturb: float = 1.2,
) -> PreparedSweep:
    """Check everything a sweep needs, draw its trials and plan where they run; creates
    nothing. Every bad input is a UsageError naming it. `request`: every trial's launch
    (its resources, cloud, cap on the whole sweep, name, capacity terms; None: the settings')."""
    asked = request or LaunchRequest()
    if asked.max_hours is not None:  # no trial has an hours cap yet: refused, not ignored
        raise UsageError("a sweep takes no max_hours", hint="cap its money with --max-cost")
    if asked.gpus is not None:
        raise UsageError("a sweep's trials take their GPUs from --gpus-per-trial, not gpus")
    request = asked.over(
        LaunchRequest(cloud=settings.default_cloud, spot_policy=settings.spot_policy)
    )
    if max_parallel is not None and max_parallel < 1:
        raise UsageError(f"--max-parallel must be at least 1, got {max_parallel}")
    if random is not None and random < 1:
        raise UsageError(f"--random must be at least 1 trial, got {random}")
    if gpus_per_trial is not None and gpus_per_trial < 0:
        raise UsageError(f"--gpus-per-trial must be 0 or more, got {gpus_per_trial}")
    if early_stop not in ("asha", "hyperband", "none"):
        raise UsageError(f"--pruner must be asha, hyperband or none, got '{early_stop}'")
    search, random = check_search(search, search_trials, random)
    check_pbt_options(search, pbt_interval, pbt_perturb)
    nodes = request.nodes
    check_nodes(settings, nodes)  # the launch's own checks: 1 to aws.max_nodes
    recipe = get_recipe(recipe_name, overrides or [], data_here=False)
    check_multi_node(recipe, nodes, "its trials")
    check_recipe(recipe)  # its data, now that the rest is known to fit
    wanted_metric = metric or (recipe.target.metric if recipe.target else "test_acc")
    default_mode = recipe.target.mode if recipe.target and metric is None else None
    chosen_mode = check_metric(wanted_metric, mode or default_mode)
    parsed_grid = parse_grid(grid or [])
    ranges = typed_space(parse_space(space or []))
    chosen_cloud: CloudName = request.cloud or settings.default_cloud
    gpus = recipe.resources.gpus if gpus_per_trial is None else gpus_per_trial
    notes: list[str] = []
    cpus = os.cpu_count() or 1
    per_trial = nodes if nodes is not None and nodes > 1 else 1
    # the default on AWS is 8 instances at once: 8 trials of one node, 4 of two, ...
    parallel = (
        max_parallel
        if max_parallel is not None
        else (cpus if chosen_cloud == "local" else max(1, 8 // per_trial))
    )
    if chosen_cloud == "local" and parallel > cpus:
        notes.append(f"the local cloud runs at most {cpus} trials at once (its CPU count)")
        parallel = cpus
    try:
        spec = SweepSpec(
            recipe=recipe.name,
            overrides=list(overrides or []),
            grid=parsed_grid,
            space=ranges,
            random=random,
            seed=seed,
            max_parallel=parallel,
            gpus_per_trial=gpus,
            resources=request.resource_flags(),
            cloud=chosen_cloud,
            max_cost_usd=request.max_cost_usd,
            early_stop=early_stop,
            grace_epochs=grace_epochs,
            reduction_factor=reduction_factor,
            metric=wanted_metric,
            mode=chosen_mode,
            name=request.name,
            env=dict(envs or {}),
            wait_for_capacity_s=request.wait_for_capacity_s,
            spot_policy=request.spot_policy or settings.spot_policy,
            search=search,
            trials=search_trials if search in (*MODEL_SEARCHES, "pbt") else None,
            pbt_interval=pbt_interval,
            pbt_perturb=pbt_perturb,
        )
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc)) from exc
    trials = trial_params(spec)
    check_trials(spec, trials)
    for key, rng in ranges.items():  # both ends of every range must be values the recipe takes
        for end in (rng.low, rng.high):
            value = str(int(end)) if rng.integer else repr(end)
            check_trials(spec.model_copy(update={"grid": {}}), [{key: value}])
    wanted = spec.resources.model_copy(update={"gpus": gpus}).resources_over(recipe.resources)
    if wanted.nodes > 1 and not recipe.multi_node:  # the recipe's own resources ask more
        raise UsageError(f"recipe {recipe.name} declares itself single-node; drop --nodes")
    if wanted.nodes > 1:  # every trial is a cluster run of that many nodes
        flags = spec.resources.model_copy(update={"nodes": wanted.nodes})
        spec = spec.model_copy(update={"resources": flags})
    provider = get_provider(chosen_cloud, settings)
    plan = plan_sweep(wanted, provider.offers(wanted), trials=len(trials), max_parallel=parallel)
    # one trial alone must fit under the sweep's cap; one trial's nodes at once in the quota
    check_launchable(settings, provider, wanted, plan.offers[0], spec.max_cost_usd)
    return PreparedSweep(spec, trials, plan, notes)


def start_sweep(
    ledger: Ledger,
    prepared: PreparedSweep,
    recorded: Callable[[str], None] | None = None,
) -> SweepRecord:
    """Record the sweep and its trials, and hand it to a new sweep supervisor; `recorded` is
    told the sweep's id before it starts (its notifications subscribed, say)."""
    store = SweepStore(ledger)
    sweep = store.create(prepared.spec, prepared.trials, prepared.plan.to_dict())
    if recorded is not None:
        recorded(sweep.id)
    store.set_supervisor(sweep.id, revive.spawn(ledger.settings, sweep))
    return store.get(sweep.id)


def trial_overrides(sweep: SweepRecord, params: dict[str, str]) -> list[str]:
    return overrides_of(sweep.spec, params)


def stop_sweep(ledger: Ledger, ref: str, *, timeout_s: float = 300.0) -> SweepRecord:
    """Stop a sweep: no new trials; live ones checkpoint, sync and terminate; packs end."""
    store = SweepStore(ledger)
    sweep = store.resolve(ref)
    if sweep.is_over:
        raise StateError(f"sweep {sweep.name} has already ended ({sweep.state.value})")
    store.request_stop(sweep.id, "stopped by the user")
    if not revive.is_supervised(sweep):
        store.set_supervisor(sweep.id, revive.spawn(ledger.settings, sweep))
    try:
        return wait_until(
            lambda: _over(store, sweep.id),
            timeout_s=timeout_s,
            what=f"sweep {sweep.name} to stop",
        )
    except WaitTimeout:
        raise StateError(
            f"sweep {sweep.name} did not stop within {timeout_s:.0f} s",
            hint=f"see {sweep.sweep_dir / SUPERVISOR_LOG_FILE}",
        ) from None


def _over(store: SweepStore, sweep_id: str) -> SweepRecord | None:
    sweep = store.get(sweep_id)
    return sweep if sweep.is_over else None


def wait_for_end(ledger: Ledger, sweep_id: str, poll_s: float = 0.5) -> SweepRecord:
    store = SweepStore(ledger)
    steady = Backoff(first_s=poll_s, factor=1.0, max_s=poll_s)
    return wait_until(
        lambda: _over(store, sweep_id),
        timeout_s=math.inf,  # a sweep ends by its own plan, its budget or a stop
        what=f"sweep {sweep_id} to end",
        backoff=steady,
    )


def counts(store: SweepStore, sweep: SweepRecord) -> dict[str, int]:
    """How many trials are pending, live, done, pruned, failed, skipped."""
    out = {"trials": 0, "pending": 0, "live": 0, "succeeded": 0, "pruned": 0, "failed": 0}
    out["skipped"] = out["stopped"] = 0
    for trial in store.trials(sweep.id):
        out["trials"] += 1
        if trial.status is TrialStatus.PENDING:
            out["pending"] += 1
        elif trial.status is TrialStatus.SKIPPED:
            out["skipped"] += 1
        elif trial.status is TrialStatus.PRUNED:
            out["pruned"] += 1
        elif trial.run_id is not None:
            run = store.ledger.get_run(trial.run_id)
            if not run.is_terminal:
                out["live"] += 1
            else:
                out[run.state.value] = out.get(run.state.value, 0) + 1
    return out


__all__ = [
    "PreparedSweep",
    "SweepState",
    "counts",
    "prepare_sweep",
    "start_sweep",
    "stop_sweep",
    "wait_for_end",
]
