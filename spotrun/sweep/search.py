"""A model-based search: Optuna's TPE, CMA-ES or QMC sampler proposing one trial's values each
time a place frees up, told how each trial ended.

Asynchronous: a trial is asked for when the sweep can launch one, so the sampler has been told
every trial that finished by then, and knows the values of the ones still running (TPE's
constant liar counts them as bad, so it does not propose their neighbourhood again at once).

The study is kept in the sweep's folder (Optuna's JournalStorage, an append-only file), so a
restarted controller loads it with every trial it asked for and told. Each study trial carries
the sweep trial's index (a user attribute), which makes asking and telling safe to repeat.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any, Literal

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from spotrun.core.errors import UsageError
from spotrun.store.sweep_spec import SweepSpec
from spotrun.sweep.draws import distributions_of, shown_params

INDEX_ATTR = "sweep_trial"  # the sweep trial's index, on its study trial
Outcome = Literal["complete", "pruned", "failed"]


def startup_trials(trials: int) -> int:
    """Random trials before TPE models the results: Optuna's 10, fewer for a short sweep (a
    third of it, at least 2) so that a 12-trial sweep still searches."""
    return max(2, min(10, trials // 3))


def make_sampler(spec: SweepSpec, asked_before: int) -> optuna.samplers.BaseSampler:
    """The spec's sampler. Its seed moves on by the trials already asked, so a restarted
    controller does not propose the first trials' values again."""
    seed = spec.seed + asked_before
    if spec.search == "tpe":
        return optuna.samplers.TPESampler(
            seed=seed,
            constant_liar=True,
            n_startup_trials=startup_trials(spec.trials or 0),
            multivariate=True,
        )
    if spec.search == "cmaes":
        # Categorical (--grid) keys are drawn at random beside CMA-ES (Optuna's own fallback).
        return optuna.samplers.CmaEsSampler(
            seed=seed,
            n_startup_trials=startup_trials(spec.trials or 0),
            warn_independent_sampling=False,
        )
    if spec.search == "qmc":
        # The sequence's position comes from the study itself: the seed (its scrambling) stays.
        with warnings.catch_warnings():  # "experimental" since Optuna 3.0: said once, in docs
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.QMCSampler(
                seed=spec.seed, scramble=True, warn_independent_sampling=False
            )
    raise UsageError(f"--search {spec.search} is not a model-based search")


class Searcher:
    def __init__(self, spec: SweepSpec, journal: Path, study_name: str) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.spec = spec
        self.space = distributions_of(spec)
        storage = JournalStorage(JournalFileBackend(str(journal)))
        direction = (
            optuna.study.StudyDirection.MAXIMIZE
            if spec.mode == "max"
            else optuna.study.StudyDirection.MINIMIZE
        )
        loaded = optuna.create_study(
            study_name=study_name, storage=storage, direction=direction, load_if_exists=True
        )
        asked = len(loaded.get_trials(deepcopy=False))
        self.study = optuna.load_study(
            study_name=study_name, storage=storage, sampler=make_sampler(spec, asked)
        )

    def _by_index(self) -> dict[int, FrozenTrial]:
        found = {}
        for trial in self.study.get_trials(deepcopy=False):
            index = trial.user_attrs.get(INDEX_ATTR)
            if isinstance(index, int):
                found[index] = trial
        return found

    def propose(self, index: int) -> dict[str, str]:
        """Sweep trial `index`'s values: asked of the sampler, or the ones it was given already
        (a controller that stopped between asking and launching)."""
        known = self._by_index().get(index)
        if known is not None:
            return shown_params(self.spec, known.params)
        trial = self.study.ask(self.space)
        trial.set_user_attr(INDEX_ATTR, index)
        return shown_params(self.spec, trial.params)

    def tell(self, index: int, outcome: Outcome, records: list[dict[str, Any]]) -> bool:
        """Tell the sampler how trial `index` ended, its metric at its last evaluation the
        value; False when there was nothing (new) to tell."""
        trial = self._by_index().get(index)
        if trial is None or trial.state is not TrialState.RUNNING:
            return False
        last = _last_value(records, self.spec.metric)
        if outcome == "complete" and last is not None:
            self.study.tell(trial.number, last[1])
            return True
        if outcome == "pruned" and last is not None:
            # what a pruned trial reached, so TPE ranks it by how far it got
            optuna.trial.Trial(self.study, trial._trial_id).report(last[1], step=last[0])
            self.study.tell(trial.number, state=TrialState.PRUNED)
            return True
        self.study.tell(trial.number, state=TrialState.FAIL)
        return True

    def told(self) -> list[FrozenTrial]:
        """The study's trials that have an outcome, in the order they were asked."""
        return [t for t in self.study.get_trials(deepcopy=False) if t.state.is_finished()]


def _last_value(records: list[dict[str, Any]], metric: str) -> tuple[int, float] | None:
    """(epoch, value) of the metric's last finite evaluation."""
    found = None
    for record in records:
        value, epoch = record.get(metric), record.get("epoch")
        if isinstance(value, (int, float)) and isinstance(epoch, int) and math.isfinite(value):
            found = (epoch, float(value))
    return found
