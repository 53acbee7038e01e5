"""The controller's budget watch: checked every budget_check_s (a clock the test moves), each
thing it has to say told once."""

from __future__ import annotations

import time
from pathlib import Path

from spotrun.cloud.local import LocalProvider
from spotrun.control.budget_watch import BudgetWatch
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.waiting import ManualClock
from spotrun.store.ledger import InstanceRecord, Ledger


def test_checked_at_its_interval_and_told_once(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    with Ledger(settings) as ledger:
        uncapped = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="aws"))
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="aws", max_cost_usd=1.0))
        clock = ManualClock()
        watch = BudgetWatch(ledger, LocalProvider(settings), clock=clock)
        assert watch.check(uncapped) is None and ledger.events(uncapped.id) == []

        def told() -> list[str]:
            return [e.message for e in ledger.events(run.id) if e.kind == "budget"]

        assert watch.check(run) is None  # nothing bills yet: said once
        assert told() == ["nothing live is billing at a price above 0"]
        # An instance whose price nobody knows: the projection cannot be made; the run goes on.
        unpriced = InstanceRecord(
            "i-1", run.id, "aws", "x9.huge", "on-demand", "running", "us-east-1", "us-east-1a",
            launched_at=time.time(),
        )  # fmt: skip
        ledger.upsert_instance(unpriced)
        assert watch.check(run) is None
        assert len(told()) == 1  # within budget_check_s: not looked at again
        clock.advance(settings.budget_check_s)
        assert watch.check(run) is None
        assert told()[1:] == [
            "budget not projected: no on-demand price for x9.huge in us-east-1 (instance i-1)"
        ]
        clock.advance(settings.budget_check_s)
        assert watch.check(run) is None and len(told()) == 2  # the same note is not repeated
