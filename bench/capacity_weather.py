"""A day of spot capacity weather, replayed in minutes, for 20 runs: today's behaviour (no
waiting, spot only) beside waiting for capacity (spot, --wait-for-capacity 2h) and
--spot-policy auto (on-demand once spot has been waited for 2h).

The weather (spotlab/capacity.py), in the lab's two regions: every spot pool of the lab's CPU
types (c6i.large, m6i.large) in us-east-1 (zones a-c) runs dry from 03:00 to 05:30 and from
13:00 to 16:00, in us-west-2 (zones a, b) from 04:00 to 07:00 and from 14:00 to 15:00 (so both
are dry at 04:00-05:30 and 14:00-15:00), and live spot instances are interrupted at a rate per
instance-hour (--rate, default 0.1: pessimistic next to the Spot Instance advisor's "<5%" a
month band, as a bad day in a busy pool is). Every run is launched with --regions over both.

A run is `--cmd "sleep JOB"` (two hours of work, scaled): the job restarts from nothing on a
replacement, so every interruption costs its work again. The runs are launched one an hour
from 00:30. Time is compressed by --factor (default 240: a day in 6 minutes, each behaviour
about 11 minutes on a loaded 2-core machine): the lab's schedule and interruption rate, the
job, spotrun's wait bound and its pauses between asks are all divided by it through settings.
Not compressed: the lab's boot, EC2's waits and each `spotrun launch` (seconds, tens of them
on a loaded machine), so each run's overhead weighs more here than on EC2: at 240 a launch's
30 s is two day-hours, and a dry spell of 1.5 day-hours can pass unseen; at 480 (a day in 3
minutes) no run saw one. Dollars are the ledger's (`spotrun cost`)
scaled back by the factor (per-second billing; EC2's 60 s minimum is then overstated).
What the free first hour saved is read from the ledger: every spot instance EC2 interrupted
whose compute line is $0, priced at its zone's spot price for its seconds. Compression
overstates it: an instance that lived 15 wall seconds lived 2 day-hours, and AWS bills an
interruption after the first hour; those (free in the ledger, whose clock is the wall's) are
counted apart as "free only compressed" and left out of the saving.

    .venv/bin/python bench/capacity_weather.py [--runs 20] [--factor 240] [--arms today,wait,auto]
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
from spotlab.capacity import CapacitySchedule, Interruptions, Pool, Steps  # noqa: E402
from spotlab.lab import (  # noqa: E402
    DEFAULT_SPOT_PRICES,
    OTHER_REGION,
    OTHER_SPOT_PRICES,
    OTHER_ZONES,
    REGION,
    ZONES,
    Lab,
)
from spotrun.core.config import load_settings  # noqa: E402
from spotrun.cost.cost_report import cost_report  # noqa: E402
from spotrun.store.ledger import Ledger  # noqa: E402

HOUR = 3600.0
TYPES = ("c6i.large", "m6i.large")
# hours of the day when every pool of a region is empty
DRY_SPELLS_H = {REGION: ((3.0, 5.5), (13.0, 16.0)), OTHER_REGION: ((4.0, 7.0), (14.0, 15.0))}
ZONES_OF = {REGION: ZONES, OTHER_REGION: OTHER_ZONES}
SPOT_PRICE = {
    **{(t, z): p for t, ps in DEFAULT_SPOT_PRICES.items() for z, p in zip(ZONES, ps)},
    **{(t, z): p for t, ps in OTHER_SPOT_PRICES.items() for z, p in zip(OTHER_ZONES, ps)},
}
SPOT_ENDS = ("Server.SpotInstanceTermination", "Server.SpotInstanceShutdown")
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
    free_saved_usd: float  # interrupted in their first (day-)hour, $0 in the ledger
    free_compressed: int  # $0 in the ledger, yet past their first day-hour: AWS would bill


def schedule_steps(region: str) -> list[tuple[float, int | None]]:
    steps: list[tuple[float, int | None]] = [(0.0, None)]
    for start_h, end_h in DRY_SPELLS_H[region]:
        steps += [(start_h * HOUR, 0), (end_h * HOUR, None)]
    return steps


def write_config(lab: Lab, home: Path, factor: float, arm: dict[str, Any]) -> None:
    lab.config.write_config(home)
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
        env = {**os.environ, **lab.config.env(), "SPOTRUN_HOME": str(home), "PYTHONPATH": str(REPO)}
        # day-seconds of the schedule read off the wall clock, compressed
        began = time.monotonic()
        pools: dict[Pool | None, Steps] = {}
        for region, zones in ZONES_OF.items():
            steps = [(at * scale, size) for at, size in schedule_steps(region)]
            pools.update({(t, z): steps for t in TYPES for z in zones})
        lab.capacity.spot_pools.schedule = CapacitySchedule(pools, clock=time.monotonic)
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
            # Each launch is started on the day's schedule and not waited for: on a loaded
            # machine one takes tens of seconds, hours of the compressed day.
            launches = []
            for n in range(runs):
                at = (0.5 + n * 24.0 / max(runs, 24)) * HOUR * scale
                time.sleep(max(0.0, began + at - time.monotonic()))
                launches.append(subprocess.Popen(
                    [sys.executable, "-m", "spotrun", "launch", "--cmd", f"sleep {job_s:.1f}",
                     "--cloud", "aws", "-d", "--name", f"{arm}-{n:02d}",
                     "--regions", f"{REGION},{OTHER_REGION}"],
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                ))  # fmt: skip
            for n, launch in enumerate(launches):
                stdout, stderr = launch.communicate()
                if launch.returncode == 0:
                    launched.append(stdout.strip())
                else:
                    print(f"  {arm}: launch {n} refused: {stderr.strip()[-200:]}")
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
        saved, compressed = free_first_hour(home, lab, launched, factor)
        for run_id in launched:  # nothing left running past the bench
            if states.get(run_id) not in ENDED:
                subprocess.run(
                    [sys.executable, "-m", "spotrun", "stop", run_id],
                    env=env, capture_output=True, cwd=REPO,
                )  # fmt: skip
    finished = sum(1 for r in launched if states.get(r) == "succeeded")
    for run_id, message in lost_messages(home, launched).items():
        print(f"  {arm}: lost {run_id}: {message[:160]}")
    return Day(
        arm,
        finished,
        runs - finished,
        wall_h,
        (total - on_demand) * factor,
        on_demand * factor,
        waited,
        saved,
        compressed,
    )


def priced(home: Path, lab: Lab, launched: list[str]) -> tuple[float, float]:
    """The runs' cost and its on-demand part, exact (`spotrun cost` rounds to the cent,
    which a compressed day's amounts fall under)."""
    with lab.config.environ(), Ledger(load_settings(home)) as ledger:
        report = cost_report(ledger, by="run")
    rows = [r for r in report.rows if r.run is not None and r.run.id in launched]
    total = sum((r.amounts.total for r in rows), Fraction(0))
    on_demand = sum((r.amounts.on_demand_market for r in rows), Fraction(0))
    return float(total), float(on_demand)


def free_first_hour(home: Path, lab: Lab, launched: list[str], factor: float) -> tuple[float, int]:
    """What the free first hour saved, in day dollars: the spot instances EC2 interrupted
    whose compute line is $0, at their zone's spot price for their day-seconds; and how many
    more were $0 only because the day is compressed (past their first day-hour)."""
    saved, compressed = 0.0, 0
    with lab.config.environ(), Ledger(load_settings(home)) as ledger:
        for run_id in launched:
            free = {
                line.instance_id
                for line in ledger.cost_lines(run_id)
                if line.kind == "compute" and line.amount == 0
            }
            for inst in ledger.instances(run_id):
                ended = inst.end_reason or ""
                if inst.id not in free or inst.market != "spot" or not ended.startswith(SPOT_ENDS):
                    continue
                if inst.launched_at is None or inst.terminated_at is None:
                    continue
                day_s = (inst.terminated_at - inst.launched_at) * factor
                if day_s >= HOUR:
                    compressed += 1
                    continue
                price = SPOT_PRICE.get((inst.instance_type, inst.zone or ""), 0.0)
                saved += price * max(day_s, 60.0) / HOUR
    return saved, compressed


def lost_messages(home: Path, launched: list[str]) -> dict[str, str]:
    """Why each run that did not succeed ended as it did (its last message)."""
    with sqlite3.connect(home / "ledger.db") as db:
        rows = db.execute("SELECT id, state, message FROM runs").fetchall()
    return {
        run_id: f"{state}: {message or ''}"
        for run_id, state, message in rows
        if run_id in launched and state != "succeeded"
    }


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
    parser.add_argument("--factor", type=float, default=240.0, help="day-seconds per second")
    parser.add_argument("--rate", type=float, default=0.1, help="interruptions/instance-hour")
    parser.add_argument("--arms", default="today,wait,auto")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(hardware_line())
    print(
        f"a day of weather compressed {args.factor:g}x: pools dry "
        + "; ".join(
            f"{region} " + ", ".join(f"{a:g}h-{b:g}h" for a, b in spells)
            for region, spells in DRY_SPELLS_H.items()
        )
        + f"; {args.rate:g} interruptions per spot instance-hour; {args.runs} runs of "
        f"{JOB_H:g}h launched one an hour, --regions {REGION},{OTHER_REGION}"
    )
    days = []
    with tempfile.TemporaryDirectory(prefix="sr-weather-", dir="/tmp") as scratch:
        for arm in args.arms.split(","):
            days.append(replay(arm, args.runs, args.factor, args.rate, Path(scratch), args.seed))
            print(f"  {arm}: done", flush=True)
    print(
        f"\n{'behaviour':<28} {'finished':>8} {'lost':>5} {'waited':>6} {'wall (h)':>9} "
        f"{'spot $':>8} {'on-demand $':>12} {'free 1st h saved $':>18} {'free only compressed':>20}"
    )
    words = {
        "today": "today (no wait, spot only)",
        "wait": "wait 2h, spot only",
        "auto": "wait 2h, then on-demand",
    }
    for d in days:
        print(
            f"{words.get(d.arm, d.arm):<28} {d.finished:>8} {d.lost:>5} {d.waited:>6} "
            f"{d.wall_h:>9.1f} {d.spot_usd:>8.2f} {d.on_demand_usd:>12.2f} "
            f"{d.free_saved_usd:>18.2f} {d.free_compressed:>20}"
        )
    print(f"(dollars scaled back by {args.factor:g}; {hardware_line()})")


if __name__ == "__main__":
    main()
