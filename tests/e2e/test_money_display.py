"""One amount, one rule, in every view (issue 34, point 2): a run that cost a tenth of a cent
reads the same non-zero amount in `cost`, `ls` and `status`, and JSON and CSV keep it exact.

The run is built through the Ledger API (as spotlab/costs.py builds its runs); the CLI prices
it itself from the lab's EC2 price history and Pricing API.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

import pytest

from spotlab import Lab
from spotlab.costs import Clock
from spotlab.fixtures import use_lab
from spotlab.prices import utc
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.money import show_usd
from spotrun.core.runstates import RunState
from spotrun.store.ledger import InstanceRecord, Ledger
from tests.conftest import Env

pytestmark = pytest.mark.slow

T0 = utc("2025-03-10 09:00:00")
TYPE = "g5.xlarge"
SPOT = 0.066  # USD/h: a minute of it is $0.0011


@pytest.fixture
def tiny(env: Env, lab: Lab) -> Iterator[Env]:
    """A run that ran one billed minute on a spot g5.xlarge at $0.066/h, and ended."""
    lab.prices.set_spot(TYPE, "us-east-1a", [(T0 - 86400, SPOT)])
    lab.prices.set_on_demand(TYPE, 1.006)
    with use_lab(env, lab, root_volume_gb=8):
        clock = Clock(T0)
        ledger = Ledger(load_settings(env.home), clock=clock)
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", name="tiny", cloud="aws"))
        moves = [(1, RunState.REQUESTED), (2, RunState.PROVISIONING), (3, RunState.BOOTSTRAPPING)]
        moves += [(4, RunState.RUNNING), (58, RunState.SYNCING), (60, RunState.SUCCEEDED)]
        for at, state in moves:
            clock.at = T0 + at
            ledger.transition(run.id, state, state.value)
        ledger.upsert_instance(
            InstanceRecord(
                id="i-tiny",
                run_id=run.id,
                provider="aws",
                instance_type=TYPE,
                market="spot",
                state="terminated",
                region="us-east-1",
                zone="us-east-1a",
                launched_at=float(T0),
                terminated_at=float(T0 + 60),
                end_reason="Client.UserInitiatedShutdown: User initiated shutdown",
            )
        )
        ledger.close()
        yield env


def test_a_tenth_of_a_cent_reads_the_same_everywhere_and_exact_in_json_and_csv(
    tiny: Env,
) -> None:
    (row,) = json.loads(tiny.cli("cost", "--json", check=True).stdout)
    spot = row["spot_usd"]
    assert spot == pytest.approx(SPOT / 60)  # exact: not rounded to the cent (0.0)
    total = row["cost_usd"]
    assert 0.001 < total < 0.005  # a cent's rounding would show $0.00
    (listed,) = csv.DictReader(io.StringIO(tiny.cli("cost", "--csv", check=True).stdout))
    assert float(listed["spot_usd"]) == spot and float(listed["cost_usd"]) == total
    shown = show_usd(total)
    assert shown.startswith("$0.00") and shown != "$0.00"
    (line,) = [r for r in tiny.cli("cost", check=True).stdout.splitlines() if r.startswith("tiny")]
    assert shown in line.split(), line
    listed = tiny.cli("ls", "--all", check=True).stdout  # a run of 2025: not a recent one
    (ls_line,) = [r for r in listed.splitlines() if " tiny " in r]
    assert shown in ls_line.split(), ls_line
    status = tiny.cli("status", "tiny", check=True).stdout
    assert f"cost {shown}" in status, status
    said = json.loads(tiny.cli("status", "tiny", "--json", check=True).stdout)
    assert show_usd(said["cost_usd"]) == shown
