"""The sweep supervisor: one detached process per sweep that keeps its trials going.

It launches trials up to max-parallel, each a run driven by its own RunController in a thread
of this one process (no process per trial: a process costs seconds of CPU to start, a thread
nothing), reads their synced metrics, stops the losers early (ASHA), holds the budget, and
ends packs whose last trial has ended. Like a run supervisor it holds a lock on its sweep's
folder for its whole life, and the next spotrun command restarts one that died; the new one
adopts the trials that are still live.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, Literal

from spotrun.cloud import get_provider
from spotrun.cloud.base import Provider
from spotrun.cloud.by_name import launch_caveat
from spotrun.cloud.plan import with_on_demand
from spotrun.control.controller import RunController
from spotrun.core.config import LaunchSpec, Resources, Settings
from spotrun.core.durations import show_duration
from spotrun.core.errors import SpotrunError, StateError
from spotrun.core.lazy import lazy_module
from spotrun.core.locks import try_lock as _try_lock
from spotrun.core.metrics_file import MetricsTail, read_all
from spotrun.core.money import show_usd, show_usd_per_hour
from spotrun.core.rundir import METRICS_FILE, SUPERVISOR_LOCK_FILE, SWEEP_STUDY_FILE
from spotrun.core.waiting import Backoff, wait_until
from spotrun.cost import budget
from spotrun.recipes import get_recipe
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.sweep_spec import MODEL_SEARCHES
from spotrun.store.sweeps import SweepRecord, SweepState, SweepStore, TrialRecord, TrialStatus
from spotrun.sweep.packs import PackKeeper, provider_for_trial
from spotrun.sweep.pbt_population import Population
from spotrun.sweep.planner import SweepPlan
from spotrun.sweep.space import overrides_of
from spotrun.sweep.spend import can_finish_another, expected_trial_s, next_trial, sweep_spend
from spotrun.sweep.sweep_news import tell_end, tell_pruned

if TYPE_CHECKING:
    from spotrun.sweep import asha, search
else:
    # optuna (~0.1 s, numpy): pruned and searched sweeps only
    asha = lazy_module("spotrun.sweep.asha")
    search = lazy_module("spotrun.sweep.search")

log = logging.getLogger(__name__)

# Seconds from deciding to stop a trial until its instance stops billing (checkpoint, sync,
# terminate): what the budget keeps in hand.
STOP_MARGIN = budget.StopMargin(checkpoint_s=20.0, sync_s=20.0, terminate_s=20.0)
BUDGET_REASON = "stopped by the sweep's budget"


# -------------------------------------------------------------- trial threads
class TrialThread(threading.Thread):
    """Drives one trial's run with a RunController, holding the run's supervisor lock so no
    run supervisor is started for it."""

    def __init__(self, settings: Settings, run_id: str, provider: Provider) -> None:
        super().__init__(name=f"trial-{run_id}", daemon=True)
        self.settings = settings
        self.run_id = run_id
        self.provider = provider

    def run(self) -> None:
        ledger = Ledger(self.settings)
        try:
            run = ledger.get_run(self.run_id)
            lock = _try_lock(run.run_dir / SUPERVISOR_LOCK_FILE, wait_s=3.0)
            if lock is None:  # another process drives it; wait for its end
                wait_until(
                    lambda: ledger.get_run(self.run_id).is_terminal,
                    timeout_s=math.inf,  # its driver ends it
                    what=f"run {self.run_id} to end",
                    backoff=Backoff(first_s=1.0, factor=1.0, max_s=1.0),
                )
                return
            try:
                ledger.set_supervisor(self.run_id, os.getpid())
                provider = provider_for_trial(ledger, run, self.provider)
                RunController(ledger, self.run_id, provider=provider).drive()
            finally:
                lock.close()
        except Exception:  # the controller has recorded the failure; keep the sweep going
            log.exception("trial %s: its controller stopped with an error", self.run_id)
        finally:
            ledger.close()


# ------------------------------------------------------------------- the loop
class SweepSupervisor:
    def __init__(self, settings: Settings, sweep_id: str, *, poll_s: float | None = None) -> None:
        self.settings = settings
        self.ledger = Ledger(settings)
        self.store = SweepStore(self.ledger)
        self.sweep = self.store.get(sweep_id)
        self.spec = self.sweep.spec
        assert self.sweep.plan is not None
        self.plan = SweepPlan.from_dict(self.sweep.plan)
        self.provider = get_provider(self.sweep.cloud, settings)
        self.poll_s = (
            poll_s if poll_s is not None else (0.5 if self.sweep.cloud == "local" else 1.0)
        )
        self.threads: dict[str, TrialThread] = {}
        self.tails: dict[str, MetricsTail] = {}
        self.ending: tuple[SweepState, str] | None = None  # set once the sweep winds down
        self.stopper = None
        self._final_epochs: dict[int, int | None] = {}
        if self.spec.early_stop in ("asha", "hyperband"):
            self.stopper = asha.EarlyStopper(
                self.spec.metric,
                self.spec.mode,
                grace_epochs=self.spec.grace_epochs,
                reduction_factor=self.spec.reduction_factor,
                pruner="hyperband" if self.spec.early_stop == "hyperband" else "asha",
                max_epochs=self._sweep_epochs(),
                study_name=self.sweep.name,  # Hyperband's brackets: the same for the same name
            )
        self.searcher = None
        self._told: set[int] = set()
        if self.spec.search in MODEL_SEARCHES:
            self.searcher = search.Searcher(
                self.spec, self.sweep.sweep_dir / SWEEP_STUDY_FILE, study_name=self.sweep.id
            )
        self.population = (
            Population(self.ledger, self.store, self.sweep) if self.spec.search == "pbt" else None
        )
        self.packs = PackKeeper(self.store, self.provider, self.sweep, self.plan)

    def event(self, message: str) -> None:
        log.info("sweep %s: %s", self.sweep.id, message)

    # ---------------------------------------------------------------- main
    def drive(self) -> SweepRecord:
        self._adopt()
        return wait_until(
            self._one_round,
            timeout_s=math.inf,  # a sweep ends by its plan, its budget or a stop
            what=f"sweep {self.sweep.id} to end",
            backoff=Backoff(first_s=self.poll_s, factor=1.0, max_s=self.poll_s),
        )

    def _one_round(self) -> SweepRecord | None:
        """One look at the sweep and its trials; the sweep once it is over."""
        sweep = self.store.get(self.sweep.id)
        if sweep.is_over:
            return sweep
        if sweep.stop_requested and self.ending is None:
            self._wind_down(SweepState.STOPPED, sweep.message or "stopped by the user")
        self._watch_metrics()
        self._tell_search()
        self._hold_budget()
        if self.ending is None:
            self._launch_more()
        self.packs.close_idle(more_to_come=self.ending is None and bool(self._pending()))
        if not self._live_trials() and (self.ending is not None or not self._pending()):
            return self._finish()
        return None

    def _trials(self) -> list[TrialRecord]:
        return self.store.trials(self.sweep.id)

    def _pending(self) -> list[TrialRecord]:
        return [t for t in self._trials() if t.status is TrialStatus.PENDING]

    def _run(self, trial: TrialRecord) -> RunRecord | None:
        return None if trial.run_id is None else self.ledger.get_run(trial.run_id)

    def _live_trials(self) -> list[tuple[TrialRecord, RunRecord]]:
        live = []
        for trial in self._trials():
            run = self._run(trial)
            if run is not None and not run.is_terminal:
                live.append((trial, run))
        return live

    def _adopt(self) -> None:
        """Pick up trials a previous supervisor left running, and replay their metrics."""
        for trial, live in self._live_trials():
            if self.population is not None:
                self.population.seed_checkpoint(trial, live)
            self._start_thread(live)
        if self.stopper is not None:
            for trial in self._trials():
                run = self._run(trial)
                if run is not None:
                    self.tails[run.id] = MetricsTail(run.run_dir / METRICS_FILE)
                    self.stopper.observe(run.id, self.tails[run.id].read_new())
                    if run.is_terminal:
                        self.stopper.finish(run.id, _outcome(trial, run))

    def _start_thread(self, run: RunRecord) -> None:
        thread = TrialThread(self.settings, run.id, self.provider)
        self.threads[run.id] = thread
        thread.start()

    # -------------------------------------------------------------- launch
    def _launch_more(self) -> None:
        live = len(self._live_trials())
        for trial in self._pending():
            if live >= self.spec.max_parallel:
                return
            if self.population is not None:
                ready = self.population.ready(trial)
                if ready is None:  # its generation waits for the one before to end
                    return
                trial = ready
            refused = self._budget_refuses_one_more()
            if refused:
                if live == 0:  # nothing left that could end under the cap: the sweep is over
                    self._wind_down(SweepState.STOPPED, refused, run_reason=BUDGET_REASON)
                return  # the live trials go on, under the cap that _hold_budget keeps
            self._launch(trial)
            live += 1

    def _launch(self, trial: TrialRecord) -> RunRecord:
        spec = self.spec
        if self.searcher is not None and not trial.params:
            params = self.searcher.propose(trial.index)
            self.store.set_params(self.sweep.id, trial.index, params)
            trial = replace(trial, params=params)
        pack_id = self.packs.place() if self.plan.packed else None
        launch_spec = LaunchSpec(
            recipe=spec.recipe,
            overrides=[*overrides_of(spec, trial.params), *self._segment(trial)],
            resources=spec.resources.model_copy(
                update={"gpus": spec.gpus_per_trial}
            ).resources_over(Resources()),
            name=f"{self.sweep.name}-t{trial.index}",
            cloud=spec.cloud,
            env=dict(spec.env),
            wait_for_capacity_s=spec.wait_for_capacity_s,
            spot_policy=spec.spot_policy,
        )
        plan = self.plan.run_plan()
        if spec.spot_policy == "auto" and pack_id is None:  # a pack's instance is the pack's
            plan = with_on_demand(plan)
        run = self.ledger.create_run(launch_spec, plan=plan, sweep_id=self.sweep.id)
        self.store.mark(
            self.sweep.id, trial.index, TrialStatus.LAUNCHED, run_id=run.id, pack_id=pack_id
        )
        shown = ", ".join(f"{k}={v}" for k, v in trial.params.items())
        self.ledger.add_event(
            run.id, "sweep", f"trial {trial.index} of sweep {self.sweep.name}: {shown}"
        )
        self.ledger.add_event(run.id, "plan", self.plan.reason)
        lacking = launch_caveat(spec.cloud, self.ledger.settings)
        if lacking:
            self.ledger.add_event(run.id, "plan", lacking)
        self.tails[run.id] = MetricsTail(run.run_dir / METRICS_FILE)
        if self.population is not None:
            self.population.seed_checkpoint(trial, run)
        self._start_thread(run)
        self.event(f"launched trial {trial.index} ({shown}) as run {run.id}")
        return run

    def _segment(self, trial: TrialRecord) -> list[str]:
        """A PBT trial's epochs: its generation's end."""
        return [] if self.population is None else self.population.segment_overrides(trial)

    # -------------------------------------------------------- early stopping
    def _watch_metrics(self) -> None:
        if self.stopper is None:
            return
        for trial in self._trials():
            run = self._run(trial)
            if run is None:
                continue
            tail = self.tails.setdefault(run.id, MetricsTail(run.run_dir / METRICS_FILE))
            verdict = self.stopper.observe(run.id, tail.read_new(), self._final_epoch(trial))
            if run.is_terminal:
                self.stopper.finish(run.id, _outcome(trial, run))
                continue
            if verdict is not None and verdict.stop and not run.stop_requested:
                self.ledger.request_stop(run.id, verdict.reason)
                self.store.mark(
                    self.sweep.id, trial.index, TrialStatus.PRUNED, reason=verdict.reason
                )
                self.ledger.add_event(run.id, "sweep", verdict.reason)
                self.event(f"trial {trial.index}: {verdict.reason}")
                tell_pruned(self.ledger, self.sweep, run, verdict.reason)

    def _sweep_epochs(self) -> int | None:
        """Every trial's last epoch, when no trial sets its own."""
        if "epochs" in self.spec.grid or "epochs" in self.spec.space:
            return None
        try:
            return get_recipe(self.spec.recipe, self.spec.overrides, data_here=False).epochs
        except SpotrunError:
            return None

    # --------------------------------------------------------------- search
    def _tell_search(self) -> None:
        """Tell the search how each ended trial did (once; a restarted controller's study
        knows the ones told before, and says so)."""
        if self.searcher is None:
            return
        for trial in self._trials():
            run = self._run(trial)
            if trial.index in self._told or run is None or not run.is_terminal:
                continue
            records = read_all(run.run_dir / METRICS_FILE)
            if self.searcher.tell(trial.index, _outcome(trial, run), records):
                self.event(f"trial {trial.index} told to the {self.spec.search} search")
            self._told.add(trial.index)

    def _final_epoch(self, trial: TrialRecord) -> int | None:
        """The trial's last epoch (the recipe's, or its override); None if it cannot be told."""
        if trial.index not in self._final_epochs:
            try:
                recipe = get_recipe(
                    self.spec.recipe, overrides_of(self.spec, trial.params), data_here=False
                )
                self._final_epochs[trial.index] = recipe.epochs
            except SpotrunError:
                self._final_epochs[trial.index] = None
        return self._final_epochs[trial.index]

    # --------------------------------------------------------------- budget
    def _spend(self) -> tuple[Fraction, list[budget.LiveInstance]]:
        return sweep_spend(self.ledger, self.store, self.sweep)

    def _budget_refuses_one_more(self) -> str | None:
        """Why the budget cannot take one more trial; None when it can. Once a trial has run
        to its end, a new one must be affordable whole, after the live ones have finished (at
        the price now); before that, its start and stop must fit."""
        cap = self.spec.max_cost_usd
        if cap is None:
            return None
        spent, live = self._spend()
        now = int(time.time())
        new = next_trial(self.plan, now)
        projected = budget.spend_at(now + STOP_MARGIN.total_s, now, spent, [*live, *new])
        if projected > Fraction(repr(cap)):
            return (
                f"budget: another trial could take the spend past the {show_usd(cap)} cap; "
                "no new trials"
            )
        runs = [(t, self._run(t)) for t in self._trials()]
        whole = [r.duration_s() for t, r in runs if r is not None and r.state.value == "succeeded"]
        trial_s = expected_trial_s(whole)
        if trial_s is None:
            return None
        price = self._usd_per_trial_hour_now(live)
        elapsed = [r.duration_s() for _t, r in runs if r is not None and not r.is_terminal]
        cap_usd = Fraction(repr(cap))
        if can_finish_another(spent, cap_usd, trial_s, price, elapsed, STOP_MARGIN.total_s):
            return None
        return (
            f"budget: {show_usd(cap_usd - spent)} of the {show_usd(cap)} cap is left; after the "
            f"live trials, it cannot pay for another whole trial (~{show_duration(trial_s)} at "
            f"{show_usd_per_hour(price)}); no new trials"
        )

    def _usd_per_trial_hour_now(self, live: list[budget.LiveInstance]) -> Fraction:
        """A trial's price per hour at the dearest live instance's price now, else as planned."""
        planned = Fraction(repr(self.plan.usd_per_trial_hour))
        if not live:
            return planned
        dearest = max(inst.usd_per_hour for inst in live)
        return dearest * self.plan.nodes / self.plan.trials_per_instance

    def _hold_budget(self) -> None:
        cap = self.spec.max_cost_usd
        if cap is None or self.ending is not None:
            return
        spent, live = self._spend()
        verdict = budget.decide(time.time(), spent, Fraction(repr(cap)), live, STOP_MARGIN)
        if verdict.action is budget.Action.STOP_NOW:
            self._wind_down(
                SweepState.STOPPED,
                f"budget: {show_usd(spent)} spent of the {show_usd(cap)} cap; {verdict.reason}",
                run_reason=BUDGET_REASON,
            )

    # ---------------------------------------------------------------- ending
    def _wind_down(self, state: SweepState, message: str, *, run_reason: str | None = None) -> None:
        """No new trials; live ones stopped through the normal stop path; pending skipped."""
        self.ending = (state, message)
        self.store.set_message(self.sweep.id, message)
        self.event(message)
        stopping = state is SweepState.STOPPED and (
            run_reason is not None or self.store.get(self.sweep.id).stop_requested
        )
        for trial in self._pending():
            self.store.mark(self.sweep.id, trial.index, TrialStatus.SKIPPED, reason=message)
        if stopping:
            for _trial, run in self._live_trials():
                if not run.stop_requested:
                    self.ledger.request_stop(run.id, run_reason or "stopped with its sweep")

    def _finish(self) -> SweepRecord:
        for thread in self.threads.values():
            thread.join(timeout=60)
        # a trial may have ended after this round's telling: the study hears of it before the
        # sweep is marked over, so a reader of the ended sweep finds every trial told
        self._tell_search()
        self.packs.close_idle(more_to_come=False)
        state, message = self.ending or (SweepState.COMPLETED, self._summary())
        try:
            ended = self.store.end(self.sweep.id, state, message)
        except StateError:
            return self.store.get(self.sweep.id)
        tell_end(self.ledger, ended)  # queued; the controller's worker sends it
        return ended

    def _summary(self) -> str:
        trials = self._trials()
        runs = [self._run(t) for t in trials]
        done = sum(1 for r in runs if r is not None and r.state.value == "succeeded")
        pruned = sum(1 for t in trials if t.status is TrialStatus.PRUNED)
        failed = sum(1 for r in runs if r is not None and r.state.value == "failed")
        parts = [f"{done} of {len(trials)} trials succeeded"]
        if pruned:
            by = self.stopper.name if self.stopper is not None else "early stopping"
            parts.append(f"{pruned} stopped early by {by}")
        if failed:
            parts.append(f"{failed} failed")
        return ", ".join(parts)


def _outcome(trial: TrialRecord, run: RunRecord) -> Literal["complete", "pruned", "failed"]:
    if trial.status is TrialStatus.PRUNED:
        return "pruned"
    if run.state.value == "succeeded":
        return "complete"
    return "failed"
