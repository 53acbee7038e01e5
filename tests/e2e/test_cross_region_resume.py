"""A replacement in another region (issue 32, item 3): the home region's spot pools run dry
after a spot notice, so the run's replacement lands in the lab's other region; it fetches the
newest checkpoint from the run's bucket across regions and resumes from it (the metrics go on,
they do not start again), and the bytes that crossed regions are an event and a transfer line
in the bill that `spotrun cost` shows."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from spotlab import Lab
from spotlab import spot as spotlab
from spotlab.fixtures import use_lab
from spotlab.lab import OTHER_REGION, REGION, ZONES
from spotrun.core.config import load_settings
from spotrun.core.money import show_usd
from spotrun.cost.rules import CROSS_REGION_USD_PER_GB, GB
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

BOTH = f"{REGION},{OTHER_REGION}"


@pytest.fixture
def spot_env(env: Env, lab: Lab) -> Iterator[Env]:
    with use_lab(env, lab, **spotlab.FAST):
        yield env


def test_a_replacement_in_another_region_resumes_and_bills_the_transfer(
    spot_env: Env, lab: Lab
) -> None:
    args = ["launch", "digits-fast", "--cloud", "aws", "--regions", BOTH]
    args += ["--instance-type", "c6i.large", "-d"]
    for item in spotlab.OVERRIDES:
        args += ["--set", item]
    scenario = spotlab.Scenario("replacement in the other region", spot_env, lab)
    scenario.run_id = spot_env.cli(*args, check=True).stdout.strip()
    first = scenario.live_instance()
    assert lab.region_of(first) == REGION  # the home region is the cheaper one
    scenario.wait_epoch(2)
    for zone in ZONES:  # the home region's pools run dry
        lab.capacity.set_spot("c6i.large", zone, 0)
    # a notice: the job checkpoints and the instance stores it in S3 before EC2 takes it back
    lab.interruptions.interrupt(first)
    second = scenario.live_instance(other_than=first)
    assert lab.region_of(second) == OTHER_REGION
    resumed_epoch = scenario.wait_host_resumed(second)
    assert resumed_epoch >= 2  # resumed, not started again

    wait_for(lambda: scenario.state() in ("succeeded", "failed"), 600, "the run to end")
    assert scenario.state() == "succeeded", scenario.events()
    # the metrics go on from the checkpoint: every step once, in order, to the last epoch
    rows = [json.loads(x) for x in (scenario.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in rows]
    assert steps == sorted(set(steps)), steps
    assert rows[-1]["epoch"] == spotlab.EPOCHS
    host_log = scenario.host_job_log(second)
    assert "resumed at epoch" in host_log

    events = scenario.events()
    restored = [e for e in events if e.startswith("resume: restored")]
    assert restored and "from the durable store" in restored[-1], events
    (crossed,) = [e for e in events if e.startswith("transfer:")]
    found = re.search(r"(\d+) bytes from (\S+) to (\S+),", crossed)
    assert found is not None, crossed
    size = int(found.group(1))
    assert (found.group(2), found.group(3)) == (REGION, OTHER_REGION)
    checkpoint = re.search(r"ckpt-\d{9}\.pt", crossed)
    assert checkpoint is not None, crossed
    stored = lab.s3.head_object(
        Bucket=lab.bucket, Key=f"runs/{scenario.run_id}/checkpoints/{checkpoint.group(0)}"
    )
    assert size == stored["ContentLength"]  # the checkpoint's bytes, all of them

    usd = CROSS_REGION_USD_PER_GB * size / GB
    with Ledger(load_settings(spot_env.home)) as ledger:
        (line,) = [c for c in ledger.cost_lines(scenario.run_id) if c.kind == "transfer"]
    assert (line.instance_id, line.unit, line.amount) == (second, "GB", usd)

    shown = spot_env.cli("cost", scenario.run_id, check=True).stdout
    said = " ".join(shown.split())
    assert f"{size} bytes read across regions, {show_usd(float(usd))}" in said, shown
    record = json.loads(spot_env.cli("cost", scenario.run_id, "--json", check=True).stdout)
    (row,) = record if isinstance(record, list) else record["rows"]
    assert row["transfer_bytes"] == size
    assert lab.instances(scenario.run_id, states=("running", "pending")) == []
