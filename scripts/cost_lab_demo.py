"""A lab run whose spot price changes while it trains, and what `spotrun cost` says of it.

    PYTHONPATH=. python scripts/cost_lab_demo.py [--plot cost-lab.png]

Starts the test lab (moto's EC2 with a real sshd host per instance), gives c6i.large a spot
price history that steps twice during the run (made-up, large prices so the cents show),
launches `digits-fast --cloud aws` in the foreground, then prints `spotrun cost RUN`, its
`--json` row and the per-second brute-force sum the report must equal, and writes the plot.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spotlab import Lab  # noqa: E402
from spotlab.lab import ZONES  # noqa: E402
from spotrun.core.config import load_settings  # noqa: E402
from spotrun.cost.amounts import format_usd, whole_second  # noqa: E402
from spotrun.cost.rules import MINIMUM_BILLED_S  # noqa: E402
from spotrun.store.ledger import Ledger  # noqa: E402

TYPE = "c6i.large"
STEPS = [(-3600.0, 18.0), (8.0, 54.0), (20.0, 36.0)]  # (seconds from launch, USD/h)


def brute_force_compute(history: list[tuple[float, float]], start: int, stop: int) -> Fraction:
    """Sum the price in force at every billed second, one second at a time."""
    total = Fraction(0)
    for second in range(start, stop):
        price = [p for at, p in history if at <= second][-1]
        total += Fraction(str(price)) / 3600
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plot", type=Path, default=Path("cost-lab.png"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sr-cost-", dir="/tmp") as scratch:
        root = Path(scratch)
        with Lab(root / "lab", bucket=False) as lab:
            home = root / "home"
            lab.config.write_config(home)
            lab.prices.set_on_demand(TYPE, 85.0)
            t0 = time.time()
            history = [(whole_second(t0 + at), price) for at, price in STEPS]
            for zone in ZONES:
                lab.prices.set_spot(TYPE, zone, [(float(at), p) for at, p in history])
            env = {
                **os.environ,
                **lab.config.env(),
                "SPOTRUN_HOME": str(home),
                "TMUX_TMPDIR": str(root),
                "PYTHONPATH": str(REPO),
            }

            def cli(*argv: str) -> str:
                proc = subprocess.run(
                    [sys.executable, "-m", "spotrun", *argv],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if proc.returncode != 0:
                    raise SystemExit(f"spotrun {' '.join(argv)} failed:\n{proc.stderr}")
                return proc.stdout

            run_id = cli(
                "launch", "digits-fast", "--cloud", "aws", "-d", "--instance-type", TYPE
            ).strip()
            print(f"run {run_id}: digits-fast on {TYPE} in the lab; prices (USD/h) {STEPS}")
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                status = json.loads(cli("status", run_id, "--json"))
                if status["state"] in ("succeeded", "failed", "stopped"):
                    break
                time.sleep(2)
            print(f"state: {status['state']}\n")
            print(cli("cost", run_id))
            row = json.loads(cli("cost", run_id, "--json"))[0]
            print(json.dumps(row, indent=1))
            cli("cost", run_id, "--plot", str(args.plot.resolve()))
            with Ledger(load_settings(home)) as ledger:
                (inst,) = ledger.instances(run_id)
            assert inst.launched_at is not None and inst.terminated_at is not None
            start, end = whole_second(inst.launched_at), whole_second(inst.terminated_at)
            billed = max(end - start, MINIMUM_BILLED_S)
            brute = brute_force_compute(history, start, start + billed)
            print(
                f"\ninstance ran {end - start} s, billed {billed} s; compute by a per-second "
                f"brute-force sum: {format_usd(brute)} (the report's spot column must equal it)"
            )
            at_launch = Fraction(str(STEPS[0][1])) * billed / 3600
            print(f"the price at launch x duration would say {format_usd(at_launch)}")
            print(f"plot written to {args.plot}")


if __name__ == "__main__":
    main()
