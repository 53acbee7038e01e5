"""`--max-cost` enforced live, in the lab: a spot price that jumps mid-run makes the projected
spend cross the cap, and the controller checkpoints, syncs and terminates before going on;
`spotrun resume` with a larger cap then continues the same run, its cost adding up."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from spotlab import Lab
from spotlab.lab import ZONES
from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


def _with_budget_settings(env: Env) -> None:
    # Top-level keys go before the [aws] table the lab wrote.
    path = env.home / "config.toml"
    path.write_text("budget_check_s = 0.5\nbudget_stop_margin_s = 6\n" + path.read_text())


def test_price_jump_stops_the_run_before_the_cap(aws_env: Env, lab: Lab) -> None:
    env = aws_env
    _with_budget_settings(env)
    start = time.time() - 3600
    for zone in ZONES:
        lab.set_spot_prices("c6i.large", zone, [(start, 0.03)])
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
        "epochs=400",
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
        lab.set_spot_prices("c6i.large", zone, [(start, 0.03), (jump, 360.0)])
    wait_for(lambda: state() == "stopped", timeout=240, what="the budget stop")

    status = env.cli("status", run_id, "--json", check=True).stdout
    assert "budget: $0.50 cap" in status
    with Ledger(load_settings(env.home)) as ledger:
        events = [e.message for e in ledger.events(run_id) if e.kind == "budget"]
    assert any("cap is reached in" in e for e in events), events  # the projection at $0.03/h
    assert any("against the $0.50 cap" in e for e in events), events  # the stop at $360/h
    assert list((run_dir / "checkpoints").glob("ckpt-*.pt")), "checkpointed before the stop"
    (item,) = lab.instances(run_id)
    assert item["State"]["Name"] == "terminated"

    # A larger cap lets the same run go on from its checkpoint to the end of one more epoch, on
    # a new instance (still at $360/h: the first one's 60 s minimum is billed at the prices in
    # force over it, so a price change now would change its bill), its cost both instances'.
    def settled() -> dict[str, Any] | None:  # the stop's cost lines written: what it cost
        found = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
        return found if found["cost_lines"] else None

    # near the cap (at $360/h each second costs 10 cents, and stopping takes seconds)
    spent = wait_for(settled, timeout=60, what="the stopped run's cost lines")["cost_usd"]
    assert spent > 0
    epochs = [json.loads(line)["epoch"] for line in (run_dir / "metrics.jsonl").open()]
    target = epochs[-1] + 1
    resumed = env.cli("resume", run_id[:6], "--max-cost", "50", "--set", f"epochs={target}")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"epoch {target}/{target}" in resumed.stdout and "succeeded" in resumed.stdout
    said = re.search(r"\$([\d.]+) spent so far", resumed.stderr)
    assert said is not None and abs(float(said.group(1)) - spent) <= 0.006, resumed.stderr
    after = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    assert after["state"] == "succeeded" and len(after["instances"]) == 2
    billed = {c["instance_id"] for c in after["cost_lines"] if c["kind"] == "compute"}
    assert billed == {i["id"] for i in after["instances"]}
    assert after["cost_usd"] > spent
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
