"""The poll interval of running jobs widens with how many one process watches, within a bound:
the CPU of a controller driving many runs stays small, and a metric still reaches the ledger
within the lag bound."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from spotrun.cloud.base import Plan
from spotrun.cloud.local import LocalProvider
from spotrun.control.controller import RunController
from spotrun.control.poll_pace import MAX_POLL_S, POLLS_PER_S, PollPace
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.jobspec import JobSpec
from spotrun.core.runstates import RunState
from spotrun.core.waiting import ManualClock
from spotrun.store.ledger import Ledger
from tests.conftest import Env


def test_the_interval_is_the_runs_own_until_many_are_watched_then_bounded() -> None:
    pace = PollPace(polls_per_s=50, max_s=4.0)
    assert pace.interval(2.0) == 2.0  # none watched
    with pace.watching():
        assert pace.watched == 1 and pace.interval(1.0) == 1.0
    assert pace.watched == 0
    with ExitStack() as runs:
        for _ in range(100):  # 100 runs: 2 s each, 50 polls a second in all
            runs.enter_context(pace.watching())
        assert pace.interval(1.0) == 2.0 and pace.interval(3.0) == 3.0
        for _ in range(900):
            runs.enter_context(pace.watching())
        assert pace.interval(1.0) == 4.0  # never wider than the bound
    assert pace.interval(10.0) == 10.0  # a run's own wider interval stays its own


def test_a_block_that_fails_is_no_longer_counted() -> None:
    pace = PollPace()
    with pytest.raises(RuntimeError), pace.watching():
        raise RuntimeError("its controller failed")
    assert pace.watched == 0


def test_the_process_default_keeps_the_lag_bound() -> None:
    """100 runs in the lab (poll_s 1 s) are polled every 2 s; no interval passes 4 s."""
    assert 100 / POLLS_PER_S == 2.0 and MAX_POLL_S <= 4.0


def test_a_running_job_is_polled_at_its_process_pace(env: Env) -> None:
    """A local run driven while two other runs are watched in the process, at one poll a
    second in all: its job is polled every 3 s (the bound), not every 0.5 s (its cloud's)."""
    settings = load_settings(env.home)
    provider = LocalProvider(settings)
    ledger = Ledger(settings)
    spec = LaunchSpec(recipe="cmd", job=JobSpec(run="sleep 1"))
    run = ledger.create_run(spec, plan=Plan(provider.offers(spec.resources), "the test's"))
    pace, clock = PollPace(polls_per_s=1.0, max_s=3.0), ManualClock()
    with pace.watching(), pace.watching():
        controller = RunController(ledger, run.id, provider=provider, pace=pace, clock=clock)
        assert controller.poll_s == 0.5
        final = controller.drive()
    assert final.state is RunState.SUCCEEDED, final.message
    assert pace.watched == 0
    assert 3.0 in clock.slept and max(clock.slept) == 3.0, clock.slept
