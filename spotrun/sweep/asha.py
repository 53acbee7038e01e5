"""Early stopping: asynchronous successive halving (ASHA) by Optuna's SuccessiveHalvingPruner,
or Hyperband (Optuna's HyperbandPruner: several ASHA brackets of different grace periods, each
trial in one of them).

Each trial is an Optuna trial of an in-memory study; its metric at every evaluation in the
synced metrics.jsonl is reported with the epoch as the step. A trial reaching a rung (the grace
period times a power of the reduction factor, in epochs) continues only if its value is in the
top 1/reduction-factor of the values reported at that rung so far; otherwise it is stopped.

The study lives in memory: a restarted sweep supervisor builds it again by replaying every
trial's metrics.jsonl, which holds everything the pruner ever saw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import optuna
from optuna.trial import TrialState


@dataclass(frozen=True)
class Verdict:
    stop: bool
    epoch: int
    value: float
    reason: str = ""


class EarlyStopper:
    def __init__(
        self,
        metric: str,
        mode: Literal["max", "min"],
        *,
        grace_epochs: int = 1,
        reduction_factor: int = 3,
        pruner: Literal["asha", "hyperband"] = "asha",
        max_epochs: int | None = None,
        study_name: str | None = None,
    ) -> None:
        """`max_epochs`: a trial's last epoch, Hyperband's most resource (None: Optuna works it
        out from the first finished trial). `study_name`: Hyperband puts a trial in a bracket
        by a hash of it and the trial's number; a fixed one (the sweep's id) puts a restarted
        controller's replayed trials back in the same brackets."""
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.metric = metric
        self.grace_epochs = grace_epochs
        self.reduction_factor = reduction_factor
        self.name = "Hyperband" if pruner == "hyperband" else "ASHA"
        chosen: optuna.pruners.BasePruner
        if pruner == "hyperband":
            chosen = optuna.pruners.HyperbandPruner(
                min_resource=grace_epochs,
                max_resource="auto" if max_epochs is None else max(max_epochs, grace_epochs),
                reduction_factor=reduction_factor,
            )
        else:
            chosen = optuna.pruners.SuccessiveHalvingPruner(
                min_resource=grace_epochs,
                reduction_factor=reduction_factor,
                min_early_stopping_rate=0,
            )
        self.study = optuna.create_study(
            study_name=study_name,
            direction="maximize" if mode == "max" else "minimize",
            pruner=chosen,
        )
        self._trials: dict[str, optuna.trial.Trial] = {}
        self._last_epoch: dict[str, int] = {}
        self._done: set[str] = set()

    def _trial(self, key: str) -> optuna.trial.Trial:
        if key not in self._trials:
            self._trials[key] = self.study.ask()
        return self._trials[key]

    def observe(
        self, key: str, records: list[dict[str, Any]], final_epoch: int | None = None
    ) -> Verdict | None:
        """Report new evaluations of trial `key`; a Verdict with stop=True says stop it now.

        A trial that has reached `final_epoch` (its last) is never stopped: it has trained all
        it will, so stopping saves nothing, and it ranks as a finished trial."""
        if key in self._done:
            return None
        trial = self._trial(key)
        newest = max(
            (r.get("epoch", 0) for r in records if isinstance(r.get("epoch"), int)), default=0
        )
        finished = final_epoch is not None and newest >= final_epoch
        for record in records:
            value, epoch = record.get(self.metric), record.get("epoch")
            if not isinstance(value, (int, float)) or not isinstance(epoch, int):
                continue
            if not math.isfinite(value) or epoch <= self._last_epoch.get(key, 0):
                continue
            self._last_epoch[key] = epoch
            trial.report(float(value), step=epoch)
            if not finished and trial.should_prune():
                # Pruned at once: what it reports while it stops must not count at later rungs.
                self._done.add(key)
                self.study.tell(trial, state=TrialState.PRUNED)
                among = (
                    f"of the trials at rung {self._rung(epoch)}"
                    if self.name == "ASHA"
                    else "of its Hyperband bracket's trials there"  # rungs differ per bracket
                )
                return Verdict(
                    True,
                    epoch,
                    float(value),
                    f"stopped early by {self.name}: {self.metric} {value:.4g} at epoch {epoch} "
                    f"is not in the top 1/{self.reduction_factor} {among}",
                )
        return None

    def _rung(self, epoch: int) -> int:
        rung = 0
        while self.grace_epochs * self.reduction_factor ** (rung + 1) <= epoch:
            rung += 1
        return rung

    def finish(self, key: str, state: Literal["complete", "pruned", "failed"]) -> None:
        """Tell the study how a trial ended (so it stops counting it as running)."""
        if key in self._done:
            return
        self._done.add(key)
        trial = self._trial(key)
        if state == "complete":
            values = trial.storage.get_trial(trial._trial_id).intermediate_values
            if values:
                self.study.tell(trial, values[max(values)])
                return
            self.study.tell(trial, state=TrialState.FAIL)
        elif state == "pruned":
            self.study.tell(trial, state=TrialState.PRUNED)
        else:
            self.study.tell(trial, state=TrialState.FAIL)
