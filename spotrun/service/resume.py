"""Continuing an ended run (`spotrun resume`) and forgetting one (`spotrun rm`).

A resumed run is the same run: its id, name, run folder, ledger rows and cost go on. It gets
fresh offers (prices move), a new supervisor and new capacity, and its job starts again from
the run folder's newest checkpoint, exactly as after a spot interruption (spotrun.control.
recovery puts the checkpoint on a new instance; the local cloud shares the folder).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from spotrun.cloud import get_provider
from spotrun.cloud.base import Offer
from spotrun.cloud.capabilities import ChecksLaunches
from spotrun.cloud.plan import make_plan
from spotrun.control import budget_guard
from spotrun.control.hours_cap import stop_begins_at
from spotrun.core.checkpoint_files import newest_complete_checkpoint
from spotrun.core.errors import StateError, UsageError
from spotrun.core.launch_request import LaunchRequest
from spotrun.core.money import show_usd
from spotrun.core.runstates import RESUMABLE, RunState
from spotrun.cost import amounts
from spotrun.cost.bills import run_cost
from spotrun.drive import revive, supervisor
from spotrun.recipes import get_recipe
from spotrun.service.follow import FollowFrom
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.runs_admin import forget_run, forget_sweep_rows, reopen_run
from spotrun.store.sweeps import SWEEPS_FOLDER, SweepRecord, SweepStore
from spotrun.train.data.source import pin_data_paths


@dataclass(frozen=True)
class TrainFurther:
    """A succeeded recipe run given more epochs: it trains on from its last checkpoint."""

    epochs_before: int
    epochs_now: int

    def note(self, checkpoint: str | None) -> str:
        """The run's event: what changed, and what the schedule does with it."""
        where = f"from {checkpoint}" if checkpoint else "with no checkpoint here"
        return (
            f"training further after success: epochs {self.epochs_before} -> {self.epochs_now} "
            f"{where}; the recipe's schedule now spans {self.epochs_now} epochs"
        )


@dataclass(frozen=True)
class Resumed:
    run: RunRecord
    checkpoint: str | None  # the newest complete checkpoint here, e.g. "ckpt-000000120.pt"
    spent_usd: Fraction  # what the run had cost before this resume
    follow_from: FollowFrom  # a follower shows what comes after the resume, not the history
    further: TrainFurther | None = None  # a succeeded run given more epochs


def resume(
    ledger: Ledger,
    ref: str,
    *,
    max_cost_usd: float | None = None,
    max_hours: float | None = None,
    overrides: list[str] | None = None,
    now: float | None = None,
) -> Resumed:
    """Start a stopped or failed run again on new capacity; returns at once. A succeeded
    recipe run given more epochs (`epochs=N` in `overrides`) trains further the same way.

    `max_cost_usd` replaces the run's cap on its whole cost (every instance it ever had);
    `max_hours` gives it that many more hours from now; `overrides` (a recipe run's) change
    recipe keys from here on (`epochs=30`: train further), after the run's own."""
    # the new caps, checked as a launch's are, before the run is looked at
    changes = LaunchRequest(max_cost_usd=max_cost_usd, max_hours=max_hours)
    run = ledger.resolve(ref)
    further = refuse_unresumable(run, overrides)
    at = time.time() if now is None else now
    spent = run_cost(ledger, run) or Fraction(0)
    update: dict[str, object] = {}
    if overrides:
        update["overrides"] = _more_overrides(run, overrides)
    if changes.max_cost_usd is not None:
        update["max_cost_usd"] = changes.max_cost_usd
    if changes.max_hours is not None:
        # The cap counts from the run's creation (the instance-side deadline does too).
        update["max_hours"] = (at - run.created_at) / 3600.0 + changes.max_hours
    spec = run.spec.model_copy(update=update)
    # Used up once the controller would begin stopping it: a resume then would only stop again.
    stop_at = stop_begins_at(run.created_at, spec.max_hours, ledger.settings.budget_stop_margin_s)
    if max_hours is None and stop_at is not None and at >= stop_at:
        raise UsageError(
            f"run {run.name} has used up its --max-hours {spec.max_hours:g} "
            "(counted from its launch, less the time a stop takes)",
            hint=f"give it more: `spotrun resume {run.name} --max-hours 1`",
        )
    provider = get_provider(spec.cloud, ledger.settings)
    plan = make_plan(spec.resources, provider.offers(spec.resources))
    if spec.max_cost_usd is not None:
        _check_budget_left(run, spec.max_cost_usd, spent, plan.chosen, ledger)
    if isinstance(provider, ChecksLaunches):
        provider.preflight(spec.resources)
    found = newest_complete_checkpoint(run.run_dir)
    # Taken before the run moves: a follower shows the move back to planned and what follows.
    follow_from = FollowFrom.now(ledger, run.id, after_step=found[1] if found else -1)
    checkpoint = found[0].name if found else None
    reason = f"resume after {run.state.value}" + (f" ({run.message})" if run.message else "")
    reopened = reopen_run(ledger, run.id, spec, plan, reason, succeeded_too=further is not None)
    ledger.add_event(
        run.id,
        "resume",
        (f"resuming from {checkpoint}" if checkpoint else "no checkpoint here yet")
        + f"; {amounts.format_usd(spent)} spent before; {plan.reason}",
    )
    if further is not None:
        ledger.add_event(run.id, "resume", further.note(checkpoint))
    pid = supervisor.spawn(ledger.settings, reopened)
    ledger.set_supervisor(run.id, pid)
    return Resumed(ledger.get_run(run.id), checkpoint, spent, follow_from, further)


def _more_overrides(run: RunRecord, overrides: list[str]) -> list[str]:
    """The run's overrides with `overrides` after them, checked against its recipe."""
    if run.spec.job is not None:
        raise UsageError("--set overrides a recipe's keys; your own command has none")
    merged = [*run.spec.overrides, *pin_data_paths(overrides)]
    get_recipe(run.spec.recipe, merged, data_here=False)  # a wrong key or type stops here
    return merged


def refuse_unresumable(run: RunRecord, overrides: list[str] | None = None) -> TrainFurther | None:
    """StateError, saying what to do instead, unless `run` may be resumed; for a succeeded
    run, what more `overrides` give it to do (more epochs: it trains further)."""
    if run.sweep_id is not None:
        raise StateError(
            f"run {run.name} is a trial of sweep {run.sweep_id}; its sweep decides its trials",
            hint="launch the trial's settings as a run of its own to train it further",
        )
    if run.state in RESUMABLE:
        return None
    if run.state is RunState.SUCCEEDED:
        if run.spec.job is not None:
            raise StateError(
                f"run {run.name} succeeded; there is nothing left of it to resume",
                hint="launch it again as a new run",
            )
        return _more_epochs(run, overrides or [])
    raise StateError(
        f"run {run.name} is {run.state.value}: it has not ended, so it goes on by itself",
        hint=f"follow it with `spotrun logs -f {run.name}`, or `spotrun stop {run.name}` first "
        "to resume it with other limits",
    )


def _more_epochs(run: RunRecord, overrides: list[str]) -> TrainFurther:
    """The succeeded run's epochs before and with `overrides`; StateError unless more."""
    before = get_recipe(run.spec.recipe, list(run.spec.overrides), data_here=False).epochs
    now = before
    if overrides:
        now = get_recipe(run.spec.recipe, _more_overrides(run, overrides), data_here=False).epochs
    if now > before:
        return TrainFurther(before, now)
    said = f"epochs={now} gives it no more to do" if overrides else "there is nothing left of it"
    raise StateError(
        f"run {run.name} succeeded after its {before} epochs; {said}",
        hint=f"train it further from its last checkpoint: "
        f"`spotrun resume {run.name} --set epochs={before * 2}` (any epochs=N above {before})",
    )


def _check_budget_left(
    run: RunRecord, cap_usd: float, spent: Fraction, offer: Offer, ledger: Ledger
) -> None:
    left = amounts.usd(cap_usd) - spent
    nodes = run.spec.resources.nodes
    margin = ledger.settings.budget_stop_margin_s
    if left <= 0:
        raise UsageError(
            f"run {run.name} has spent {amounts.format_usd(spent)} of its {show_usd(cap_usd)} cap",
            hint=f"give a larger cap for its whole cost: `spotrun resume {run.name} "
            f"--max-cost {round(float(spent) * 2 + 1, 2)}`",
        )
    try:
        budget_guard.check_affordable(float(left), offer, nodes, margin)
    except UsageError as exc:
        raise UsageError(
            f"run {run.name} has {amounts.format_usd(left)} left of its {show_usd(cap_usd)} cap "
            f"({amounts.format_usd(spent)} spent): {exc.message.split(': ', 1)[-1]}",
            hint="give a larger cap for its whole cost with --max-cost",
        ) from exc


def forget(ledger: Ledger, ref: str) -> RunRecord:
    """Delete an ended run from the ledger and its run folder; returns what it was."""
    run = ledger.resolve(ref)
    if not run.is_terminal:
        raise StateError(
            f"run {run.name} is {run.state.value}; a live run cannot be forgotten",
            hint=f"`spotrun stop {run.name}` first",
        )
    if run.sweep_id is not None:
        raise StateError(
            f"run {run.name} is a trial of sweep {run.sweep_id}; the sweep's leaderboard and "
            "cost need it",
            hint=f"it stays as long as its sweep does (`spotrun sweep rm {run.sweep_id}` "
            "forgets the sweep with its trials once it has ended)",
        )
    _refuse_supervised(run)
    # The cloud's copies first (S3's stored files, keys): if that fails the run stays known,
    # so nothing it stored is left where no spotrun command would find it again.
    get_provider(run.cloud, ledger.settings).forget(run.id)
    forget_run(ledger, run.id)
    _remove_own_folder(run.run_dir, ledger.settings.runs_dir, run.id)
    return run


def _refuse_supervised(run: RunRecord) -> None:
    if supervisor.is_supervised(run):  # its supervisor is still writing its last lines
        raise StateError(
            f"run {run.name}'s supervisor is still finishing",
            hint="try again in a moment",
        )


def _remove_own_folder(folder: Path, parent: Path, name: str) -> None:
    """Only the run's (or sweep's) own folder under SPOTRUN_HOME's, never more."""
    found = folder.resolve()
    if found.parent == parent.resolve() and found.name == name and found.is_dir():
        shutil.rmtree(found)


def forget_sweep(ledger: Ledger, ref: str) -> tuple[SweepRecord, int]:
    """Delete an ended sweep: each trial as `forget` deletes a run, the sweep's rows and its
    folder; returns what it was and how many trial runs went with it."""
    store = SweepStore(ledger)
    sweep = store.resolve(ref)
    trials = ledger.list_runs(sweep_id=sweep.id)
    live = [r for r in trials if not r.is_terminal]
    if not sweep.is_over or live:
        raise StateError(
            f"sweep {sweep.name} is live; a live sweep cannot be forgotten",
            hint=f"`spotrun sweep stop {sweep.name}` first",
        )
    if revive.is_supervised(sweep):
        raise StateError(
            f"sweep {sweep.name}'s supervisor is still finishing", hint="try again in a moment"
        )
    for run in trials:
        _refuse_supervised(run)
    provider = get_provider(sweep.cloud, ledger.settings)
    # The cloud's copies first, as for a run: the trials' stored files and keys, the packs'
    for run in trials:
        get_provider(run.cloud, ledger.settings).forget(run.id)
    for pack in store.packs(sweep.id):
        provider.forget(pack.id)
    forgotten = forget_sweep_rows(ledger, sweep.id)
    for run in trials:
        _remove_own_folder(run.run_dir, ledger.settings.runs_dir, run.id)
    _remove_own_folder(sweep.sweep_dir, ledger.settings.home / SWEEPS_FOLDER, sweep.id)
    return sweep, len(forgotten)
