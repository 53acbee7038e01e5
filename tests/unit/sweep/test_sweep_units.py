"""Sweeps' pure parts: parsing the search space, the packing planner, the split of a shared
instance's seconds, ASHA's verdicts, and the ledger's v2 -> v3 migration."""

from __future__ import annotations

import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest

from spotrun.cloud.base import Offer
from spotrun.core.config import Resources, load_settings
from spotrun.core.errors import UsageError
from spotrun.cost.pack_shares import split
from spotrun.store.ledger import SCHEMA_VERSION, Ledger
from spotrun.store.sweep_spec import SweepSpec
from spotrun.store.sweeps import SweepStore, TrialStatus
from spotrun.sweep.asha import EarlyStopper
from spotrun.sweep.planner import plan_sweep
from spotrun.sweep.space import trial_params, typed_space
from spotrun.sweep.spec import check_metric, parse_grid, parse_space


# ------------------------------------------------------------------ parsing
def test_grid_and_space_parse_and_refuse_bad_input() -> None:
    assert parse_grid(["lr=0.1,0.2", "batch_size=32"]) == {
        "lr": ["0.1", "0.2"],
        "batch_size": ["32"],
    }
    for bad in (["lr="], ["lr"], ["=1,2"], ["lr=0.1,,0.2"], ["lr=1,1"], ["lr=1", "lr=2"]):
        with pytest.raises(UsageError):
            parse_grid(bad)
    assert parse_space(["lr=0.01:1:log"]) == {"lr": (0.01, 1.0, True)}
    for bad in (["lr=1:0.1"], ["lr=0:1:log"], ["lr=a:b"], ["lr=1"], ["lr=0.1:1:lin"]):
        with pytest.raises(UsageError):
            parse_space(bad)
    with pytest.raises(UsageError, match="does not log"):
        check_metric("val_bleu", None)
    assert check_metric("test_loss", None) == "min"


def test_space_is_typed_by_the_recipe_key_and_draws_are_seeded() -> None:
    space = typed_space({"epochs": (2.0, 6.0, False), "lr": (0.01, 1.0, True)})
    assert space["epochs"].integer and not space["lr"].integer
    with pytest.raises(UsageError, match="not a number"):
        typed_space({"model": (1.0, 2.0, False)})
    with pytest.raises(UsageError, match="whole-number"):
        typed_space({"epochs": (1.5, 3.0, False)})
    spec = SweepSpec(recipe="digits-fast", space=space, random=5, max_parallel=2)
    drawn = trial_params(spec)
    assert len(drawn) == 5 and drawn == trial_params(spec)  # the same seed, the same trials
    for params in drawn:
        assert 2 <= int(params["epochs"]) <= 6 and 0.01 <= float(params["lr"]) <= 1.0
    grid = SweepSpec(recipe="x", grid={"a": ["1", "2"], "b": ["x", "y", "z"]}, max_parallel=1)
    assert len(trial_params(grid)) == 6
    with pytest.raises(UsageError, match="no trials"):
        trial_params(SweepSpec(recipe="x", max_parallel=1))


# ------------------------------------------------------------------ planner
def _offer(kind: str, gpus: int, price: float, zone: str = "us-east-1a") -> Offer:
    return Offer(
        "aws", kind, "us-east-1", zone, gpus, "A10G", 24.0, 4 * gpus, 16.0 * gpus, price, 3 * price
    )


def test_planner_packs_when_cheaper_per_trial_hour_and_says_why() -> None:
    offers = [_offer("g5.xlarge", 1, 0.44), _offer("g5.12xlarge", 4, 1.2)]
    plan = plan_sweep(Resources(gpus=1), offers, trials=8, max_parallel=8)
    assert plan.packed and plan.trials_per_instance == 4
    assert plan.offers[0].instance_type == "g5.12xlarge"
    assert plan.usd_per_trial_hour == pytest.approx(0.3)
    assert "packing 4 trials per g5.12xlarge" in plan.reason and "$0.4400" in plan.reason
    # dearer per trial-hour: one trial per instance, and the reason says what packing would cost
    dear = [_offer("g5.xlarge", 1, 0.44), _offer("g5.12xlarge", 4, 2.0)]
    plan = plan_sweep(Resources(gpus=1), dear, trials=8, max_parallel=8)
    assert not plan.packed and plan.offers[0].instance_type == "g5.xlarge"
    assert "would cost $0.5000 per trial-hour" in plan.reason
    # only two trials at once: a 4-GPU instance would be half empty
    plan = plan_sweep(Resources(gpus=1), offers, trials=8, max_parallel=2)
    assert not plan.packed


# ------------------------------------------------------------------- shares
def test_shared_seconds_split_equally_and_add_up() -> None:
    spans = split(0, 100, [("a", 10, 60), ("b", 20, 100)])
    paid = {k: sum((s * (b - a) for a, b, s in v), Fraction(0)) for k, v in spans.items()}
    assert paid["a"] == 10 + 10 + Fraction(40, 2)  # boot gap before it, alone, then half
    assert paid["b"] == Fraction(40, 2) + 40
    assert sum(paid.values()) == 100  # every second of the instance is someone's


# --------------------------------------------------------------------- ASHA
def test_asha_stops_a_trial_below_the_rung_and_keeps_the_leader() -> None:
    stopper = EarlyStopper("test_acc", "max", grace_epochs=1, reduction_factor=2)
    assert stopper.observe("good", [{"epoch": 1, "test_acc": 0.9}]) is None
    verdict = stopper.observe("bad", [{"epoch": 1, "test_acc": 0.3}])
    assert verdict is not None and verdict.stop and verdict.epoch == 1
    assert "top 1/2" in verdict.reason
    # what it reports while it stops no longer counts: "good" stays the leader at rung 1
    assert stopper.observe("bad", [{"epoch": 2, "test_acc": 0.99}]) is None
    assert stopper.observe("good", [{"epoch": 2, "test_acc": 0.92}]) is None
    stopper.finish("bad", "pruned")
    assert stopper.observe("better", [{"epoch": 1, "test_acc": 0.95}]) is None
    stopper.finish("good", "complete")


def test_asha_never_stops_a_trial_that_reached_its_last_epoch() -> None:
    # Late metrics (epochs 1-4 of a 4-epoch trial seen at once) or a rung at the last epoch:
    # the trial has trained all it will, so stopping it saves nothing.
    stopper = EarlyStopper("test_acc", "max", grace_epochs=1, reduction_factor=2)
    assert stopper.observe("good", [{"epoch": 1, "test_acc": 0.9}], final_epoch=4) is None
    late = [{"epoch": e, "test_acc": 0.1 * e} for e in (1, 2, 3, 4)]
    assert stopper.observe("late", late, final_epoch=4) is None
    # the same values arriving one epoch at a time are stopped at the first rung
    verdict = stopper.observe("early", late[:1], final_epoch=4)
    assert verdict is not None and verdict.stop and verdict.epoch == 1


# ---------------------------------------------------------------- migration
def test_a_v2_ledger_gains_the_sweep_tables_and_keeps_its_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Ledger(load_settings(home)) as ledger:  # made at the latest version; take it to v2
        pass
    path = home / "ledger.db"
    with sqlite3.connect(path) as db:
        for table in ("pack_stays", "pack_instances", "packs", "sweep_trials", "sweeps"):
            db.execute(f"DROP TABLE {table}")
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        db.execute(
            "INSERT INTO runs (id, name, recipe, cloud, state, created_at, spec_json, run_dir) "
            "VALUES ('abc123abc123', 'old-run', 'digits-fast', 'local', 'succeeded', 1.0, "
            "'{\"recipe\": \"digits-fast\"}', '/nonexistent')"
        )
    assert SCHEMA_VERSION >= 3
    with Ledger(load_settings(home)) as ledger:
        assert ledger.get_run("abc123abc123").name == "old-run"
        store = SweepStore(ledger)
        spec = SweepSpec(recipe="digits-fast", grid={"lr": ["0.1", "0.2"]}, max_parallel=1)
        sweep = store.create(spec, [{"lr": "0.1"}, {"lr": "0.2"}], {"offers": []})
        assert [t.status for t in store.trials(sweep.id)] == [TrialStatus.PENDING] * 2
        assert store.resolve(sweep.name).id == sweep.id
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
            str(SCHEMA_VERSION),
        )
