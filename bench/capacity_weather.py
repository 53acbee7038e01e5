"""A day of spot capacity weather, replayed in minutes, for 20 runs: today's behaviour (no
waiting, spot only) beside waiting for capacity (spot, --wait-for-capacity 2h) and
--spot-policy auto (on-demand once spot has been waited for 2h).

The weather (spotlab/capacity.py): every spot pool of the lab's CPU types (c6i.large,
m6i.large, zones a-c) runs dry from 03:00 to 05:30 and from 13:00 to 16:00, and live spot
instances are interrupted at a rate per instance-hour (--rate, default 0.1: pessimistic next to
the Spot Instance advisor's "<5%" a month band, as a bad day in a busy pool is). One region:
another developer's regions work is not used here (the lab's second region stays idle).

A run is `--cmd "sleep JOB"` (two hours of work, scaled): the job restarts from nothing on a
replacement, so every interruption costs its work again. The runs are launched one an hour
from 00:30. Time is compressed by --factor (default 480: a day in 3 minutes): the lab's
schedule and interruption rate, the job, spotrun's wait bound and its pauses between asks are
all divided by it through settings. Not compressed: the lab's boot and EC2's waits (seconds),
so each run's overhead weighs more here than on EC2. Dollars are the ledger's (`spotrun cost`)
scaled back by the factor (per-second billing; EC2's 60 s minimum is then overstated).
Not shown: what the free first hour of an interrupted spot instance saved (the ledger's cost
lines already leave it out; the report does not break it out).

    .venv/bin/python bench/capacity_weather.py [--runs 20] [--factor 480] [--arms today,wait,auto]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._env import hardware_line  # noqa: E402
from spotlab.capacity import CapacitySchedule, Interruptions  # noqa: E402
from spotlab.lab import ZONES, Lab  # noqa: E402
from spotrun.core.config import load_settings  # noqa: E402
from spotrun.cost.cost_report import cost_report  # noqa: E402
from spotrun.store.ledger import Ledger  # noqa: E402

HOUR = 3600.0
TYPES = ("c6i.large", "m6i.large")
DRY_SPELLS_H = ((3.0, 5.5), (13.0, 16.0))  # hours of the day when every pool is empty
JOB_H = 2.0
WAIT_H = 2.0
ARMS = {
    "today": {"wait_for_capacity_s": 0.0, "spot_policy": "spot"},
    "wait": {"wait_for_capacity_s": WAIT_H * HOUR, "spot_policy": "spot"},
    "auto": {"wait_for_capacity_s": WAIT_H * HOUR, "spot_policy": "auto"},
}
ENDED = ("succeeded", "failed", "stopped")


@dataclass
class Day:
    arm: str
    finished: int
    lost: int
    wall_h: float
    spot_usd: float
    on_demand_usd: float
    waited: int  # runs that waited for capacity at least once


def schedule_steps() -> list[tuple[float, int | None]]:
    steps: list[tuple[float, int | None]] = [(0.0, None)]
    for start_h, end_h in DRY_SPELLS_H:
        steps += [(start_h * HOUR, 0), (end_h * HOUR, None)]
    return steps


def write_config(lab: Lab, home: Path, factor: float, arm: dict[str, Any]) -> None:
    lab.write_config(home)
    top = {
        "wait_for_capacity_s": arm["wait_for_capacity_s"] / factor,
        "capacity_ask_first_s": 300.0 / factor,  # 5 minutes, then doubling
        "capacity_ask_max_s": 1200.0 / factor,  # 20 minutes at most
        "spot_policy": arm["spot_policy"],
    }
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in top.items())
    config = home / "config.toml"
    config.write_text(lines + config.read_text())


def replay(arm: str, runs: int, factor: float, rate: float, root: Path, seed: int) -> Day:
    scale = 1.0 / factor  # wall seconds per day-second
    with Lab(root / f"lab-{arm}", bucket=False, host_nice=19) as lab:
        home = root / f"home-{arm}"
        write_config(lab, home, factor, ARMS[arm])
        env = {**os.environ, **lab.env(), "SPOTRUN_HOME": str(home), "PYTHONPATH": str(REPO)}
        # day-seconds of the schedule read off the wall clock, compressed
        began = time.monotonic()
        steps = [(at * scale, size) for at, size in schedule_steps()]
        lab.spot_pools.schedule = CapacitySchedule(
            {(t, z): steps for t in TYPES for z in ZONES}, clock=time.monotonic
        )
        interruptions = Interruptions(
            rate,
            lambda: [
                i["InstanceId"]
                for i in lab.instances(states=("running",))
                if i.get("InstanceLifecycle") == "spot"
            ],
            lab.interrupt,
            hour_s=HOUR * scale,
            seed=seed,
            tick_s=0.25,
        ).start()
        job_s = JOB_H * HOUR * scale
        launched: list[str] = []
        try:
            for n in range(runs):
                at = (0.5 + n * 24.0 / max(runs, 24)) * HOUR * scale
                time.sleep(max(0.0, began + at - time.monotonic()))
                proc = subprocess.run(
                    [sys.executable, "-m", "spotrun", "launch", "--cmd", f"sleep {job_s:.1f}",
                     "--cloud", "aws", "-d", "--name", f"{arm}-{n:02d}"],
                    env=env, capture_output=True, text=True, cwd=REPO,
                )  # fmt: skip
                if proc.returncode == 0:
                    launched.append(proc.stdout.strip())
                else:
                    print(f"  {arm}: launch {n} refused: {proc.stderr.strip()[-200:]}")
            deadline = time.monotonic() + 24 * HOUR * scale + 600
            while time.monotonic() < deadline:
                states = run_states(home)
                if all(states.get(r) in ENDED for r in launched):
                    break
                time.sleep(1.0)
            wall_h = (time.monotonic() - began) / scale / HOUR
        finally:
            interruptions.stop()
        states = run_states(home)
        total, on_demand = priced(home, lab, launched)
        waited = count_waited(home)
        for run_id in launched:  # nothing left running past the bench
            if states.get(run_id) not in ENDED:
                subprocess.run(
                    [sys.executable, "-m", "spotrun", "stop", run_id],
                    env=env, capture_output=True, cwd=REPO,
                )  # fmt: skip
    finished = sum(1 for r in launched if states.get(r) == "succeeded")
    return Day(
        arm,
        finished,
        runs - finished,
        wall_h,
        (total - on_demand) * factor,
        on_demand * factor,
        waited,
    )


def priced(home: Path, lab: Lab, launched: list[str]) -> tuple[float, float]:
    """The runs' cost and its on-demand part, exact (`spotrun cost` rounds to the cent,
    which a compressed day's amounts fall under)."""
    with lab.environ(), Ledger(load_settings(home)) as ledger:
        report = cost_report(ledger, by="run")
    rows = [r for r in report.rows if r.run is not None and r.run.id in launched]
    total = sum((r.amounts.total for r in rows), Fraction(0))
    on_demand = sum((r.amounts.on_demand_market for r in rows), Fraction(0))
    return float(total), float(on_demand)


def run_states(home: Path) -> dict[str, str]:
    with sqlite3.connect(home / "ledger.db") as db:
        return dict(db.execute("SELECT id, state FROM runs").fetchall())


def count_waited(home: Path) -> int:
    with sqlite3.connect(home / "ledger.db") as db:
        found = db.execute(
            "SELECT COUNT(DISTINCT run_id) FROM events WHERE kind = 'capacity' "
            "AND message LIKE 'waiting for capacity:%'"
        ).fetchone()
    return int(found[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--factor", type=float, default=480.0, help="day-seconds per second")
    parser.add_argument("--rate", type=float, default=0.1, help="interruptions/instance-hour")
    parser.add_argument("--arms", default="today,wait,auto")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(hardware_line())
    print(
        f"a day of weather compressed {args.factor:g}x: pools dry "
        + ", ".join(f"{a:g}h-{b:g}h" for a, b in DRY_SPELLS_H)
        + f"; {args.rate:g} interruptions per spot instance-hour; {args.runs} runs of "
        f"{JOB_H:g}h launched one an hour; one region (us-east-1)"
    )
    days = []
    with tempfile.TemporaryDirectory(prefix="sr-weather-", dir="/tmp") as scratch:
        for arm in args.arms.split(","):
            days.append(replay(arm, args.runs, args.factor, args.rate, Path(scratch), args.seed))
            print(f"  {arm}: done", flush=True)
    print(
        f"\n{'behaviour':<28} {'finished':>8} {'lost':>5} {'waited':>6} {'wall (h)':>9} "
        f"{'spot $':>8} {'on-demand $':>12}"
    )
    words = {
        "today": "today (no wait, spot only)",
        "wait": "wait 2h, spot only",
        "auto": "wait 2h, then on-demand",
    }
    for d in days:
        print(
            f"{words.get(d.arm, d.arm):<28} {d.finished:>8} {d.lost:>5} {d.waited:>6} "
            f"{d.wall_h:>9.1f} {d.spot_usd:>8.2f} {d.on_demand_usd:>12.2f}"
        )
    print(f"(dollars scaled back by {args.factor:g}; {hardware_line()})")


if __name__ == "__main__":
    main()
