"""`--max-cost` enforced live, in the lab: a spot price that jumps mid-run makes the projected
spend cross the cap, and the controller checkpoints, syncs and terminates in time: what the run
cost, billed from EC2's own times and prices, stays under the cap. `spotrun resume` with a
larger cap then continues the same run, its cost adding up."""

from __future__ import annotations

import json
import re
import time
from fractions import Fraction

import pytest

from spotlab import Lab
from spotlab.lab import ZONES
from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


# Stopping (checkpoint, sync, terminate) is given 60 s: ample on a loaded machine, where it
# takes seconds. At the jump's $20/h the cap's $0.50 is 90 s away, so the stop begins about
# 30 s after the jump, with 60 s to spare.
STOP_MARGIN_S = 60
JUMP_USD_PER_H = 20.0


def _with_budget_settings(env: Env) -> None:
    # Top-level keys go before the [aws] table the lab wrote.
    path = env.home / "config.toml"
    path.write_text(
        f"budget_check_s = 0.5\nbudget_stop_margin_s = {STOP_MARGIN_S}\n" + path.read_text()
    )


def test_price_jump_stops_the_run_before_the_cap(aws_env: Env, lab: Lab) -> None:
    env = aws_env
    _with_budget_settings(env)
    start = time.time() - 3600
    for zone in ZONES:
        lab.prices.set_spot("c6i.large", zone, [(start, 0.03)])
    run_id = env.cli(
        "launch",
        "digits-fast",
        "--cloud",
        "aws",
        "-d",
        "--instance-type",
        "c6i.large",
        "--max-cost",
        "0.50",
        "--set",
        "epochs=5000",  # far more than the budget lets it train
        check=True,
    ).stdout.strip()

    def state() -> str:
        with Ledger(load_settings(env.home)) as ledger:
            return ledger.get_run(run_id).state.value

    run_dir = env.home / "runs" / run_id
    log = run_dir / "job.log"
    wait_for(
        lambda: log.exists() and "epoch 2/" in log.read_text(),
        timeout=240,
        what="training under way (synced log)",
    )
    # At $0.03/h the cap is hours away, so the controller has let it train.
    assert state() == "running"
    jump = time.time() + 1
    for zone in ZONES:
        lab.prices.set_spot("c6i.large", zone, [(start, 0.03), (jump, JUMP_USD_PER_H)])
    wait_for(lambda: state() == "stopped", timeout=240, what="the budget stop")

    status = env.cli("status", run_id, "--json", check=True).stdout
    assert "budget: $0.50 cap" in status
    with Ledger(load_settings(env.home)) as ledger:
        events = [e.message for e in ledger.events(run_id) if e.kind == "budget"]
    assert any("cap is reached in" in e for e in events), events  # the projection at $0.03/h
    assert any("against the $0.50 cap" in e for e in events), events  # the stop at $20/h
    assert list((run_dir / "checkpoints").glob("ckpt-*.pt")), "checkpointed before the stop"
    (item,) = lab.instances(run_id)
    assert item["State"]["Name"] == "terminated"
    # What it cost, per second at EC2's prices up to EC2's termination time: under the cap,
    # and most of it at the jump's price (at least the ~30 s before the stop began).
    (row,) = json.loads(env.cli("cost", run_id, "--json", check=True).stdout)
    assert row["error"] is None, row
    with Ledger(load_settings(env.home)) as ledger:
        spent = ledger.run_cost_exact(run_id)  # the exact sum of the lines `cost` priced
    assert Fraction("0.10") < spent <= Fraction("0.50"), float(spent)

    # A larger cap lets the same run go on from its checkpoint to the end of one more epoch, on
    # a new instance (the price stays at the jump's: the first one's 60 s minimum is billed at
    # the prices in force over it, so a price change now would change its bill), its cost both
    # instances'.
    epochs = [json.loads(line)["epoch"] for line in (run_dir / "metrics.jsonl").open()]
    target = epochs[-1] + 1
    resumed = env.cli("resume", run_id[:6], "--max-cost", "50", "--set", f"epochs={target}")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"epoch {target}/{target}" in resumed.stdout and "succeeded" in resumed.stdout
    said = re.search(r"\$([\d.]+) spent so far", resumed.stderr)
    assert said is not None and abs(float(said.group(1)) - float(spent)) <= 0.006, resumed.stderr
    after = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    assert after["state"] == "succeeded" and len(after["instances"]) == 2
    billed = {c["instance_id"] for c in after["cost_lines"] if c["kind"] == "compute"}
    assert billed == {i["id"] for i in after["instances"]}
    assert after["cost_usd"] > float(spent)
    # its curve against cost: the spend at each evaluation, growing, the last one all of it
    (curve,) = json.loads(env.cli("plot", run_id, "--x", "cost", "--json", check=True).stdout)[
        "curves"
    ]
    assert curve["x"] == sorted(curve["x"]) and 0 < curve["x"][-1] <= after["cost_usd"]


def test_a_cap_below_the_first_minute_never_launches(aws_env: Env, lab: Lab) -> None:
    env = aws_env
    proc = env.cli(
        "launch",
        "digits-fast",
        "--cloud",
        "aws",
        "--instance-type",
        "c6i.large",
        "--max-cost",
        "0.0001",
    )
    assert proc.returncode == 2, proc.stderr
    assert "--max-cost $0.0001 is below what the cheapest offer costs" in proc.stderr
    assert "one-minute minimum" in proc.stderr
    assert not lab.instances()
    assert env.runs() == []
