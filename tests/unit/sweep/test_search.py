"""The glue between a sweep and Optuna's samplers and pruners: proposals asked once per trial,
outcomes told once, a study kept in its journal file across a restart; Hyperband's verdicts;
the cost-aware check of whether the budget pays for one more whole trial."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import optuna
import pytest

from spotrun.core.errors import UsageError
from spotrun.store.sweep_spec import Range, SweepSpec
from spotrun.sweep.asha import EarlyStopper
from spotrun.sweep.search import Searcher
from spotrun.sweep.space import trial_params
from spotrun.sweep.spend import can_finish_another, expected_trial_s


def _spec(search: str, trials: int = 12) -> SweepSpec:
    return SweepSpec.model_validate(
        {
            "recipe": "digits-fast",
            "space": {"lr": Range(low=0.001, high=1.0, log=True)},
            "grid": {"batch_size": ["32", "64"]},
            "search": search,
            "trials": trials,
            "max_parallel": 2,
        }
    )


def _curve(value: float, epochs: int = 3) -> list[dict[str, float | int]]:
    return [{"epoch": e, "test_acc": value * e / epochs} for e in range(1, epochs + 1)]


@pytest.mark.parametrize("search", ["tpe", "cmaes", "qmc"])
def test_a_model_search_proposes_at_launch_and_its_study_survives_a_restart(
    tmp_path: Path, search: str
) -> None:
    spec = _spec(search)
    assert trial_params(spec) == [{}] * 12  # values come at launch, from the sampler
    journal = tmp_path / "study.journal"
    first = Searcher(spec, journal, "s1")
    proposed = {i: first.propose(i) for i in range(4)}
    assert first.propose(2) == proposed[2]  # asked again (a restart before launch): same values
    for i, params in proposed.items():
        assert set(params) == {"lr", "batch_size"} and 0.001 <= float(params["lr"]) <= 1.0
        assert first.tell(i, "complete", _curve(float(params["lr"])))
        assert not first.tell(i, "complete", _curve(0.5))  # told once
    # A new controller loads the study: the told trials, and a next proposal that is not the
    # first one again (the sampler's seed moved on by what was asked).
    again = Searcher(spec, journal, "s1")
    told = again.told()
    assert [t.user_attrs["sweep_trial"] for t in told] == [0, 1, 2, 3]
    assert [t.state for t in told] == [optuna.trial.TrialState.COMPLETE] * 4
    assert told[0].value == pytest.approx(float(proposed[0]["lr"]), rel=1e-3)
    after = again.propose(4)
    assert after not in proposed.values()
    assert again.propose(4) == after and len(again.study.trials) == 5


def test_tpe_knows_running_trials_and_pruned_ones_keep_their_last_value(tmp_path: Path) -> None:
    spec = _spec("tpe")
    searcher = Searcher(spec, tmp_path / "study.journal", "s2")
    searcher.propose(0)
    searcher.propose(1)
    assert searcher.tell(0, "pruned", _curve(0.3))
    assert searcher.tell(1, "failed", [])
    pruned, failed = searcher.told()
    assert pruned.state is optuna.trial.TrialState.PRUNED
    assert pruned.intermediate_values == {3: pytest.approx(0.3)}
    assert failed.state is optuna.trial.TrialState.FAIL
    sampler = searcher.study.sampler
    assert isinstance(sampler, optuna.samplers.TPESampler) and sampler._constant_liar


def test_a_search_mode_refuses_what_does_not_fit_it() -> None:
    with pytest.raises(UsageError, match="--trials N"):
        trial_params(_spec("tpe").model_copy(update={"trials": None}))
    with pytest.raises(UsageError, match="not --random"):
        trial_params(_spec("cmaes").model_copy(update={"random": 3}))
    with pytest.raises(UsageError, match="drop --random and --space"):
        trial_params(_spec("grid"))


def test_hyperband_stops_a_trial_far_behind_in_its_bracket() -> None:
    stopper = EarlyStopper(
        "test_acc",
        "max",
        grace_epochs=1,
        reduction_factor=2,
        pruner="hyperband",
        max_epochs=4,
        study_name="s3",
    )
    verdicts = []
    for i in range(12):  # enough trials that each bracket has several
        good = i % 2 == 0
        records = [{"epoch": e, "test_acc": (0.9 if good else 0.1) + e / 100} for e in (1, 2, 3)]
        verdict = stopper.observe(f"t{i}", records, final_epoch=4)
        verdicts.append((good, verdict))
    stopped = [good for good, v in verdicts if v is not None and v.stop]
    assert stopped and not any(stopped)  # only bad trials stopped
    reason = next(v.reason for _g, v in verdicts if v is not None)
    assert reason.startswith("stopped early by Hyperband: test_acc")


def test_the_budget_pays_for_another_trial_only_after_the_live_ones_finish() -> None:
    assert expected_trial_s([]) is None
    assert expected_trial_s([100.0, 300.0, 200.0]) == 375.0  # the longest, a quarter more
    price = Fraction(36)  # $36/h: $0.01 a second
    # $10 spent of $20: two live trials 100 s into a 300 s trial will spend $4 more; a new
    # one costs $3 + a 60 s stop margin $0.60: $17.60 in all
    assert can_finish_another(Fraction(10), Fraction(20), 300.0, price, [100.0, 100.0], 60)
    assert not can_finish_another(Fraction(10), Fraction(17), 300.0, price, [100.0, 100.0], 60)
    # a trial past the usual length is expected to end now, not to cost more
    assert can_finish_another(Fraction(10), Fraction(14), 300.0, price, [900.0], 60)
