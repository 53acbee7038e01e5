"""Runs priced from a real ledger: replaced instances, several zones, sweeps, days, instance
types, time and cost to target, live cost, and the controller's recorded lines."""

from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path

import pytest

from spotlab import costs as costlab
from spotlab.costs import EXPECTED, T0, Clock
from spotlab.prices import ConstructedPrices, utc
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.errors import NotFoundError
from spotrun.core.runstates import RunState
from spotrun.cost import reports
from spotrun.cost.bills import bill_run
from spotrun.cost.prices import PriceBook
from spotrun.cost.rules import AWS_METHOD, LOCAL_METHOD
from spotrun.service import runs as api
from spotrun.store.ledger import InstanceRecord, Ledger


@pytest.fixture
def lab(tmp_path: Path) -> tuple[Ledger, ConstructedPrices]:
    home = tmp_path / "home"
    costlab.build(home)
    return Ledger(load_settings(home)), costlab.price_source()


def report(ledger: Ledger, source: ConstructedPrices, **options: object) -> api.CostReport:
    return api.cost_report(ledger, sources=lambda name: source, now=T0 + 10**6, **options)  # type: ignore[arg-type]


def test_each_run_costs_what_the_seconds_add_up_to(lab: tuple[Ledger, ConstructedPrices]) -> None:
    ledger, source = lab
    rep = report(ledger, source)
    rows = {r.key: r for r in rep.rows}
    assert set(rows) == set(EXPECTED)
    for name, want in EXPECTED.items():
        got = rows[name].amounts
        assert (got.compute, got.storage, got.on_demand, got.instance_s) == (
            want.spot,
            want.storage,
            want.on_demand,
            want.instance_s,
        ), name
        assert rows[name].error is None
    assert rep.total.amounts.total == sum(w.total for w in EXPECTED.values())
    assert rep.methods == [AWS_METHOD, LOCAL_METHOD, reports.TARGET_METHOD]


def test_replaced_instance_after_a_free_interruption(lab: tuple[Ledger, ConstructedPrices]) -> None:
    ledger, source = lab
    beta = ledger.resolve("beta")
    bill = bill_run(ledger, beta, PriceBook(ledger, lambda name: source), now=T0 + 10**6)
    first, second = bill.bills
    assert first.usage.interrupted_free and first.compute == 0 and first.storage > 0
    assert second.usage.zone == "us-east-1b" and second.compute == EXPECTED["beta"].spot
    # the zone of the free instance was never asked for: nothing to price there
    assert {r[1] for r in source.requests} == {"us-east-1b"}


def test_sweep_costs_its_runs(lab: tuple[Ledger, ConstructedPrices]) -> None:
    ledger, source = lab
    rep = report(ledger, source, sweep="sw1")
    assert [r.key for r in rep.rows] == ["beta", "gamma"]
    assert rep.total.amounts.total == EXPECTED["beta"].total + EXPECTED["gamma"].total
    with pytest.raises(NotFoundError, match="no run belongs to sweep 'nope'"):
        report(ledger, source, sweep="nope")


def test_since_selects_runs_created_from_then(lab: tuple[Ledger, ConstructedPrices]) -> None:
    ledger, source = lab
    rep = report(ledger, source, since=api.parse_since("2025-03-11"))
    assert [r.key for r in rep.rows] == ["home"]
    assert api.parse_since("2025-03-10T09:00Z") == T0
    with pytest.raises(api.UsageError, match="not a date"):
        api.parse_since("last tuesday")


def test_by_instance_type_and_by_day(lab: tuple[Ledger, ConstructedPrices]) -> None:
    ledger, source = lab
    types = {r.key: r.amounts for r in report(ledger, source, by="instance-type").rows}
    aws = [EXPECTED[n] for n in ("alpha", "beta", "gamma")]
    assert types["g5.xlarge"].total == sum(w.total for w in aws)
    assert types["local"].total == 0 and types["local"].instance_s == 600
    days = {r.key: r.amounts for r in report(ledger, source, by="day").rows}
    assert days["2025-03-10"].total == sum(w.total for w in aws)
    assert days["2025-03-11"].instance_s == 600


def test_day_split_at_midnight_is_exact(tmp_path: Path) -> None:
    source = ConstructedPrices(on_demand={"g5.xlarge": 1.006})
    midnight = utc("2025-03-11 00:00:00")
    source.add("us-east-1a", "g5.xlarge", [(midnight - 86400, 0.4), (midnight + 1800, 0.6)])
    clock = Clock(midnight - 3600)
    ledger = Ledger(load_settings(tmp_path / "home"), clock=clock)
    run = ledger.create_run(LaunchSpec(recipe="digits-fast", name="late", cloud="aws"))
    ledger.upsert_instance(
        InstanceRecord(
            "i-1",
            run.id,
            "aws",
            "g5.xlarge",
            "spot",
            "terminated",
            "us-east-1",
            "us-east-1a",
            launched_at=midnight - 3600,
            terminated_at=midnight + 3600,
        )
    )
    rows = api.cost_report(ledger, by="day", sources=lambda n: source, now=midnight + 10**5).rows
    first, second = (r.amounts for r in rows)
    vol = F("0.08") * 200 / (31 * 86400)  # per second, March
    assert first.compute == F("0.4") and first.storage == 3600 * vol
    assert second.compute == F("0.2") + F("0.3") and second.storage == 3600 * vol
    assert (first.instance_s, second.instance_s) == (3600, 3600)


def test_time_and_cost_to_target(lab: tuple[Ledger, ConstructedPrices]) -> None:
    ledger, source = lab
    rows = {r.key: r for r in report(ledger, source).rows}
    alpha = rows["alpha"].target
    assert alpha is not None
    assert (alpha.step, alpha.train_s, alpha.wall_s) == (300, 3000.0, 3000.0)
    assert alpha.usd == costlab.ALPHA_COST_TO_TARGET
    # beta was interrupted at 2,340 s of running; its 3,000th second of training came 660 s
    # after it resumed at T0 + 2600
    beta = rows["beta"].target
    assert beta is not None and beta.wall_s == 2600 + 660 - 60
    assert rows["gamma"].target is None and rows["gamma"].target_wanted is not None
    record = reports.to_record(rows["alpha"], "run")
    assert record["time_to_target_s"] == 3000.0
    assert record["target"] == "test_acc max 0.97"


def test_moment_mapping() -> None:
    periods = [(100.0, 200.0), (300.0, 400.0)]
    assert reports.moment_of(50, periods) == 150
    assert reports.moment_of(150, periods) == 350
    assert reports.moment_of(999, periods) == 400
    assert reports.moment_of(1, []) is None


def test_unpriceable_run_gets_an_error_row_and_stays_out_of_the_total(
    lab: tuple[Ledger, ConstructedPrices],
) -> None:
    ledger, _ = lab
    rep = api.cost_report(ledger, sources=lambda name: None, now=T0 + 10**6)
    rows = {r.key: r for r in rep.rows}
    assert rows["alpha"].error and "no aws price source" in rows["alpha"].error
    assert rows["home"].error is None
    assert rep.total.amounts.total == 0
    assert len(rep.errors) == 3


def test_finished_run_lines_are_stored_again_when_recomputed(
    lab: tuple[Ledger, ConstructedPrices],
) -> None:
    ledger, source = lab
    alpha = ledger.resolve("alpha")
    assert ledger.cost_lines(alpha.id) == []
    report(ledger, source)
    lines = ledger.cost_lines(alpha.id)
    assert [line.kind for line in lines] == ["compute", "storage"]
    assert ledger.run_cost_exact(alpha.id) == EXPECTED["alpha"].total
    assert api.run_summary(ledger, alpha)["cost_usd"] == round(float(EXPECTED["alpha"].total), 6)


def test_live_run_costs_so_far_from_the_cache(tmp_path: Path) -> None:
    source = costlab.price_source()
    clock = Clock(T0)
    ledger = Ledger(load_settings(tmp_path / "home"), clock=clock)
    run = ledger.create_run(LaunchSpec(recipe="digits-fast", name="live", cloud="aws"))
    for state in (RunState.REQUESTED, RunState.PROVISIONING, RunState.RUNNING):
        ledger.transition(run.id, state)
    ledger.upsert_instance(
        InstanceRecord(
            "i-live",
            run.id,
            "aws",
            "g5.xlarge",
            "spot",
            "running",
            "us-east-1",
            "us-east-1a",
            launched_at=float(T0),
        )
    )
    run = ledger.get_run(run.id)
    assert api.run_cost(ledger, run, now=T0 + 1800) is None  # nothing cached yet
    book = PriceBook(ledger, lambda name: source, clock=lambda: T0 + 1800)
    bill_run(ledger, run, book, now=T0 + 1800)  # what the supervisor's refresh fetches
    so_far = api.run_cost(ledger, run, now=T0 + 3000)
    # the cache ends at T0 + 1800; the price change at T0 + 2232 is not known yet
    assert so_far == F("0.40") * 3000 / 3600 + F("0.08") * 200 * F(3000, 31 * 86400)
