"""Waiting for capacity (issue 32, item 2) and `--spot-policy auto` (item 3), through the CLI
against the lab: spot pools that dry up and come back on the lab's schedule (spotlab/capacity.py
CapacitySchedule), driven here by a clock the test moves, so that capacity comes back only once
the test has seen the run wait (no race with a loaded machine).

Short waits: the run asks again after 1 s, then 2 s (capacity_ask_first_s/max_s)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from spotlab import Lab
from spotlab.capacity import CapacitySchedule
from spotlab.fixtures import use_lab
from spotrun.core.capacity_note import is_waiting_note
from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from spotrun.store.sweeps import SweepRecord, SweepStore
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

SHORT = ["--set", "epochs=1"]
# Where a test asserts nothing of training, the run is your own command on a CPU instance, as
# digits-fast asks for (no torch start-up, no epochs): one that ends at once, or one that runs
# until the test says go (`spotrun exec` makes the file), so an interruption always finds it.
AT_ONCE = "echo done"
STARTED = "/tmp/job-started"  # on the host's own /tmp: a replacement starts without it
UNTIL_GO = f"touch {STARTED}; while [ ! -e go ]; do sleep 0.2; done"
FAST_ASKS = {"capacity_ask_first_s": 1.0, "capacity_ask_max_s": 2.0}
NOTE = re.compile(r"waiting for capacity: .+; next ask in \d+ s; gives up in \S+")


class TestClock:
    """The schedule's time, moved by the test."""

    __test__ = False

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def weather_env(env: Env, lab: Lab) -> Iterator[Env]:
    with use_lab(env, lab):
        config = env.home / "config.toml"
        top = "".join(f"{key} = {value!r}\n" for key, value in FAST_ASKS.items())
        config.write_text(top + config.read_text())  # top-level keys before [aws]
        yield env


def _dry_then(lab: Lab, clock: TestClock, back_at: float = 100.0) -> None:
    """Every spot pool empty until `back_at` on the clock, then back (no limit)."""
    lab.capacity.spot_pools.schedule = CapacitySchedule(
        {None: [(0.0, 0), (back_at, None)]}, clock=clock
    )


def _run(env: Env, run_id: str) -> dict[str, Any]:
    return next(r for r in env.runs() if r["id"] == run_id)


def _waiting(env: Env, run_id: str) -> str | None:
    """The wait `ls --json` shows for the run; the CLI is asked only once the ledger holds a
    waiting note (a poll of the ledger costs no spotrun process)."""
    with Ledger(load_settings(env.home)) as ledger:
        run = ledger.get_run(run_id)
    if run.state.value != "requested" or not is_waiting_note(run.message):
        return None
    row = _run(env, run_id)
    return row["waiting_for_capacity"] if row["state"] == "requested" else None


def _reached(env: Env, run_id: str, *states: str) -> bool:
    """Whether the run is in one of `states`; a run that ended otherwise fails the test."""
    state = env.run_state(run_id)
    if state in ("failed", "stopped") and state not in states:
        raise AssertionError(f"the run ended {state}: {_run(env, run_id)['message']}")
    return state in states


def _launch(env: Env, *flags: str) -> str:
    proc = env.cli("launch", "digits-fast", "--cloud", "aws", "--detach", *SHORT, *flags)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip()


def _launch_command(env: Env, command: str, *flags: str) -> str:
    proc = env.cli("launch", "--cmd", command, "--gpus", "0", "--cloud", "aws", "--detach", *flags)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip()


def _job_started(lab: Lab, instance_id: str) -> bool:
    host = lab.hosts.get(instance_id)
    return host is not None and host.path(STARTED).exists()


def _events(env: Env, run_id: str) -> list[str]:
    with Ledger(load_settings(env.home)) as ledger:
        return [e.message for e in ledger.events(run_id)]


def _nothing_left(lab: Lab, run_id: str) -> None:
    wait_for(
        lambda: all(i["State"]["Name"] == "terminated" for i in lab.instances(run_id)),
        timeout=60,
        what="every instance of the run terminated",
    )


def test_a_first_launch_waits_for_capacity_shows_it_and_starts_when_it_returns(
    weather_env: Env, lab: Lab
) -> None:
    """Every pool at 0: the run waits (ls and status --json say what for and when it asks
    next), asks again and again, and starts once the schedule brings capacity back."""
    clock = TestClock()
    _dry_then(lab, clock)
    run_id = _launch_command(weather_env, AT_ONCE, "--wait-for-capacity", "10m")
    note = wait_for(lambda: _waiting(weather_env, run_id), timeout=60, what="the wait shown")
    assert NOTE.fullmatch(note), note
    assert "c6i.large" in note and "(spot)" in note, note
    status = json.loads(weather_env.cli("status", run_id, "--json", check=True).stdout)
    assert status["state"] == "requested"
    assert NOTE.fullmatch(status["waiting_for_capacity"]), status["waiting_for_capacity"]
    listed = weather_env.cli("ls", check=True).stdout
    assert re.search(r"waiting for capacity: .*next ask in \d+ s", listed), listed
    # it asks again: more refusals come while it waits
    asked = len(lab.capacity.spot_pools.refused)
    wait_for(lambda: len(lab.capacity.spot_pools.refused) > asked, timeout=60, what="a second ask")
    assert lab.instances(run_id) == []
    clock.now = 100.0  # capacity is back
    wait_for(lambda: _reached(weather_env, run_id, "succeeded"), timeout=180, what="the end")
    row = _run(weather_env, run_id)
    assert row["waiting_for_capacity"] is None, row
    assert not row["message"].startswith("waiting for capacity"), row
    assert any(e.startswith("capacity after ") for e in _events(weather_env, run_id))
    _nothing_left(lab, run_id)


def test_the_bound_passing_fails_the_run_with_what_was_tried(weather_env: Env, lab: Lab) -> None:
    """No capacity for longer than --wait-for-capacity: the run fails with a summary (each
    offer, what EC2 said, how often) and nothing is left."""
    clock = TestClock()
    _dry_then(lab, clock, back_at=1e9)
    run_id = _launch(weather_env, "--wait-for-capacity", "5s")
    wait_for(lambda: weather_env.run_state(run_id) == "failed", timeout=90, what="the run to fail")
    message = _run(weather_env, run_id)["message"]
    assert re.match(r"no capacity within 5s \(\d+ asks? in \S+\); tried ", message), message
    for zone in ("us-east-1a", "us-east-1b", "us-east-1c"):
        assert re.search(
            rf"c6i\.large in {zone}: InsufficientInstanceCapacity.*? \(\d+x\)", message
        )
    assert lab.instances(run_id) == []


def test_stop_while_waiting_stops_at_once(weather_env: Env, lab: Lab) -> None:
    """`spotrun stop` while the run waits for capacity: stopped at once (not at the bound's
    end), by the user, nothing launched and nothing left running."""
    clock = TestClock()
    _dry_then(lab, clock, back_at=1e9)
    run_id = _launch(weather_env, "--wait-for-capacity", "1h")
    wait_for(lambda: _waiting(weather_env, run_id), timeout=60, what="the wait shown")
    stop = weather_env.cli("stop", run_id)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    wait_for(lambda: weather_env.run_state(run_id) == "stopped", timeout=60, what="the stop")
    row = _run(weather_env, run_id)
    assert row["message"] == "stopped by the user", row
    assert row["waiting_for_capacity"] is None
    assert lab.instances(run_id) == []


def test_a_replacement_waits_through_a_dry_spell_and_resumes(weather_env: Env, lab: Lab) -> None:
    """An interruption while spot is dry: the replacement waits (shown), then resumes when
    the schedule brings capacity back; the run ends well on its second instance."""
    clock = TestClock()
    # capacity now; dry from 10 on the clock; back at 100
    lab.capacity.spot_pools.schedule = CapacitySchedule(
        {None: [(0.0, None), (10.0, 0), (100.0, None)]}, clock=clock
    )
    proc = weather_env.cli(
        "launch", "digits-fast", "--cloud", "aws", "--detach", "--set", "epochs=8",
        "--wait-for-capacity", "10m",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    wait_for(lambda: _reached(weather_env, run_id, "running"), timeout=120, what="running")
    (first,) = lab.instances(run_id)
    clock.now = 10.0  # the pools dry up, then EC2 takes the instance back
    lab.interruptions.interrupt(first["InstanceId"])
    note = wait_for(lambda: _waiting(weather_env, run_id), timeout=90, what="the wait shown")
    assert NOTE.fullmatch(note), note
    clock.now = 100.0
    wait_for(lambda: _reached(weather_env, run_id, "succeeded"), timeout=240, what="the end")
    assert len(lab.instances(run_id)) == 2
    _nothing_left(lab, run_id)


def test_auto_takes_on_demand_after_the_wait_and_spot_again_at_the_next_replacement(
    weather_env: Env, lab: Lab
) -> None:
    """--spot-policy auto with spot dry: after the wait, an on-demand instance (EC2 says so,
    the ledger and `cost` too); when it is lost, the replacement asks spot first again and
    gets it, now that spot is back."""
    clock = TestClock()
    _dry_then(lab, clock)
    run_id = _launch_command(
        weather_env, UNTIL_GO, "--spot-policy", "auto", "--wait-for-capacity", "3s"
    )
    wait_for(lambda: _reached(weather_env, run_id, "running"), timeout=120, what="running")
    (first,) = lab.instances(run_id)
    assert "InstanceLifecycle" not in first, first  # on-demand in EC2's own words
    status = json.loads(weather_env.cli("status", run_id, "--json", check=True).stdout)
    assert [i["market"] for i in status["instances"]] == ["on-demand"]
    cost = json.loads(weather_env.cli("cost", "--json", check=True).stdout)
    (row,) = (
        [r for r in cost["rows"] if r["id"] == run_id]
        if "rows" in cost
        else [r for r in cost if r.get("id") == run_id]
    )
    assert row["market"] == "on-demand", row
    clock.now = 100.0  # spot is back; the on-demand instance is lost
    lab.interruptions.reclaim(first["InstanceId"])
    wait_for(lambda: len(lab.instances(run_id)) == 2, timeout=120, what="a replacement")
    second = next(i for i in lab.instances(run_id) if i["InstanceId"] != first["InstanceId"])
    assert second.get("InstanceLifecycle") == "spot", second
    wait_for(
        lambda: _job_started(lab, second["InstanceId"]),
        timeout=120,
        what="the job on the replacement",
    )
    weather_env.cli("exec", run_id, "--cmd", "touch go", check=True)
    wait_for(lambda: _reached(weather_env, run_id, "succeeded"), timeout=240, what="the end")
    cost = json.loads(weather_env.cli("cost", "--json", check=True).stdout)
    rows = cost["rows"] if isinstance(cost, dict) and "rows" in cost else cost
    (row,) = [r for r in rows if r.get("id") == run_id]
    assert row["market"] == "spot+on-demand", row
    assert row["on_demand_market_usd"] is not None and row["on_demand_market_usd"] >= 0
    _nothing_left(lab, run_id)


def _trial_runs(env: Env, sweep_id: str) -> list[str]:
    with Ledger(load_settings(env.home)) as ledger:
        return [t.run_id for t in SweepStore(ledger).trials(sweep_id) if t.run_id is not None]


def _sweep(env: Env, sweep_id: str) -> SweepRecord:
    with Ledger(load_settings(env.home)) as ledger:
        return SweepStore(ledger).get(sweep_id)


def test_a_sweeps_trials_wait_for_capacity_and_run_when_it_returns(
    weather_env: Env, lab: Lab
) -> None:
    """`spotrun sweep --wait-for-capacity 10m` with every pool dry: both trials wait (each
    shows what for), the sweep keeps the bound with its stored settings (a restarted
    supervisor launches trials the same), and once capacity is back both trials run and the
    sweep completes. Before, the sweep had no such flag and every trial failed at once."""
    clock = TestClock()
    _dry_then(lab, clock)
    proc = weather_env.cli(
        "sweep", "digits-fast", "--cloud", "aws", "--grid", "lr=0.1,0.2", *SHORT,
        "--max-parallel", "2", "--wait-for-capacity", "10m", "--detach",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sweep_id = proc.stdout.strip()
    assert _sweep(weather_env, sweep_id).spec.wait_for_capacity_s == 600.0
    wait_for(lambda: len(_trial_runs(weather_env, sweep_id)) == 2, timeout=60, what="both trials")
    runs = _trial_runs(weather_env, sweep_id)
    for run_id in runs:
        note = wait_for(lambda r=run_id: _waiting(weather_env, r), timeout=60, what="a wait")
        assert NOTE.fullmatch(note), note
    assert lab.instances() == []
    clock.now = 100.0  # capacity is back
    wait_for(lambda: _sweep(weather_env, sweep_id).is_over, timeout=300, what="the sweep's end")
    assert _sweep(weather_env, sweep_id).state.value == "completed"
    for run_id in runs:
        assert weather_env.run_state(run_id) == "succeeded", _run(weather_env, run_id)
        _nothing_left(lab, run_id)


@pytest.mark.parametrize(
    ("flag", "value"), [("--spot-policy", "sometimes"), ("--wait-for-capacity", "soon")]
)
def test_a_sweep_with_bad_capacity_terms_is_refused_in_one_line(
    env: Env, flag: str, value: str
) -> None:
    """A bad --spot-policy or --wait-for-capacity on `sweep`: a one-line error naming the flag
    and its value (launch's own parsing), a non-zero exit, no sweep recorded."""
    proc = env.cli("sweep", "digits-fast", "--grid", "lr=0.1,0.2", flag, value)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) <= 2, proc.stderr  # the error, and its hint
    assert flag in lines[0] and repr(value) in lines[0], proc.stderr
    assert json.loads(env.cli("sweep", "ls", "--json", check=True).stdout) == []
