"""PBT's exploit/explore rule (spotrun.sweep.pbt): the bottom quantile takes a top member's
checkpoint and perturbed values, the rest go on from their own; the same decision again after a
restart; a population sweep's trials and the input it refuses; lineage kept in the ledger
across the schema migration."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from spotrun.core.config import load_settings
from spotrun.core.errors import UsageError
from spotrun.store.ledger import SCHEMA_VERSION, Ledger
from spotrun.store.pbt_lineage import LineageRecord, LineageStore
from spotrun.store.sweep_spec import Range, SweepSpec
from spotrun.store.sweeps import SweepStore
from spotrun.sweep import pbt
from spotrun.sweep.space import trial_params


def _spec(**extra: object) -> SweepSpec:
    fields: dict[str, object] = {
        "recipe": "digits-fast",
        "overrides": ["epochs=4"],
        "space": {"lr": Range(low=0.01, high=1.0, log=True)},
        "grid": {"batch_size": ["16", "32", "64"]},
        "search": "pbt",
        "trials": 4,
        "pbt_interval": 2,
        "max_parallel": 2,
    }
    fields.update(extra)
    return SweepSpec.model_validate(fields)


def _members(values: list[float | None]) -> list[pbt.Member]:
    return [
        pbt.Member(m, 8 + m, v, {"lr": f"{0.1 * (m + 1):.6g}", "batch_size": "32"}, v is not None)
        for m, v in enumerate(values)
    ]


def test_the_bottom_quarter_copies_a_top_member_and_perturbs_its_values() -> None:
    spec = _spec()
    steps = pbt.exploit_explore(spec, _members([0.9, 0.5, 0.95, 0.7]), generation=3)
    by_member = {s.member: s for s in steps}
    # 4 members, quantile 0.25: member 1 (0.5) is the bottom one, member 2 (0.95) the top one
    bottom = by_member[1]
    assert bottom.exploited and bottom.parent_trial == 10  # member 2's trial of generation 2
    donor_lr = 0.3
    assert float(bottom.params["lr"]) in (
        pytest.approx(donor_lr * 1.2),
        pytest.approx(donor_lr / 1.2),
    )
    assert bottom.params["batch_size"] in ("16", "64")  # a neighbour of the donor's 32
    for member in (0, 2, 3):  # the rest go on from their own checkpoint, values unchanged
        step = by_member[member]
        assert not step.exploited and step.parent_trial == 8 + member
        assert step.params == _members([0.0] * 4)[member].params
    # the same decision when asked again (a restarted controller)
    assert pbt.exploit_explore(spec, _members([0.9, 0.5, 0.95, 0.7]), generation=3) == steps


def test_min_mode_a_member_without_a_result_and_values_kept_in_their_range() -> None:
    spec = _spec(mode="min", metric="test_loss", space={"lr": Range(low=0.01, high=0.31)})
    steps = {s.member: s for s in pbt.exploit_explore(spec, _members([0.2, None, 0.9, 0.1]), 1)}
    # lowest loss (member 3) is the donor; member 1 failed (no value, no checkpoint): replaced
    assert steps[1].exploited and steps[1].parent_trial == 11
    assert not steps[2].exploited  # 0.9 is the worst with a value, but the quantile is 1 wide
    assert 0.01 <= float(steps[1].params["lr"]) <= 0.31
    # a value at the top of its range stays in it when multiplied
    rng = pbt.random.Random(0)
    for _ in range(20):
        assert float(pbt.explore(spec, {"lr": "0.31"}, rng)["lr"]) <= 0.31


def test_a_population_sweep_draws_its_first_generation_and_refuses_what_cannot_run() -> None:
    spec = _spec()
    trials = trial_params(spec)
    assert len(trials) == 8  # 4 epochs in generations of 2: 2 generations of 4
    assert all(set(t) == {"lr", "batch_size"} for t in trials[:4]) and trials[4:] == [{}] * 4
    assert pbt.segment_epochs(spec, 0) == 2 and pbt.segment_epochs(spec, 1) == 4
    assert pbt.locate(6, 4) == (1, 2)
    for bad, message in (
        ({"pbt_interval": 4}, "one generation"),
        ({"trials": 1}, "at least 2"),
        ({"pbt_interval": None}, "--pbt-interval"),
        ({"early_stop": "asha"}, "drop --pruner"),
        ({"space": {}, "grid": {}}, "values to perturb"),
    ):
        with pytest.raises(UsageError, match=message):
            trial_params(_spec(**bad))


def test_lineage_is_kept_once_and_an_older_ledger_gains_its_table(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Ledger(load_settings(home)):  # made at the latest version; take it back to v4
        pass
    with sqlite3.connect(home / "ledger.db") as db:
        db.execute("DROP TABLE pbt_lineage")
        db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    assert SCHEMA_VERSION == 5
    with Ledger(load_settings(home)) as ledger:
        sweep = SweepStore(ledger).create(_spec(), trial_params(_spec()), {"offers": []})
        store = LineageStore(ledger)
        first = LineageRecord(
            sweep.id, 5, 1, 1, 2, True, "ckpt-000000022.pt", 22, "ab", 0.9, {}, {}
        )
        store.record(first)
        store.record(LineageRecord(sweep.id, 5, 1, 1, 3, False, None, None, None, None, {}, {}))
        assert store.of_sweep(sweep.id) == {5: first}  # the first decision stays
        assert first.source(2) == "t2@epoch2"
