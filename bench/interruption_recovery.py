"""Spot interruptions in the lab: the scenario matrix, recovery times and work lost.

    PYTHONPATH=. python bench/interruption_recovery.py [--only NAME] [--repeats 1]

Runs every scenario of spotlab/spot.py (digits-fast, 8 epochs, on the lab's EC2 whose
instances are real SSH hosts with an IMDSv2 endpoint each) and prints, per scenario: the outcome
(run succeeded, final metrics bit-equal to an uninterrupted run's, each evaluation once, nothing
left running, every instance in the ledger and its cost), the seconds from the fault (notice or
reclaim) to the replacement being requested and to the job running again on it, and the
training steps lost per resume (one epoch is 23 steps; a checkpoint is written every epoch), and
where each resume's checkpoint came from ("s3": the replacement fetched it from the durable
store itself; "sftp": this machine pushed its copy).
The lab's agent asks IMDS every 0.5 s (aws.notice_poll_s; EC2 default here 5 s) and the lab
reclaims an instance 8 s after its notice (EC2: 120 s).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spotlab import Lab  # noqa: E402
from spotlab import spot as spotlab  # noqa: E402
from spotlab.harness import Env  # noqa: E402


def make_env(root: Path, lab: Lab) -> Env:
    home = root / "home"
    tmux_dir = Path(tempfile.mkdtemp(prefix="sr-tmux-", dir="/tmp"))
    variables = {
        **os.environ,
        "SPOTRUN_HOME": str(home),
        "TMUX_TMPDIR": str(tmux_dir),
        "PYTHONPATH": str(REPO),
        **lab.config.env(),
    }
    variables.pop("TMUX", None)
    lab.config.write_config(home, **spotlab.FAST)
    os.environ.update({"SPOTRUN_HOME": str(home), "TMUX_TMPDIR": str(tmux_dir), **lab.config.env()})
    return Env(home, tmux_dir, variables)


def fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.1f}" for v in values) or "-"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", action="append", help="scenario names (substring)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="print each run's events")
    args = parser.parse_args()
    names = [n for n in spotlab.SCENARIOS if not args.only or any(o in n for o in args.only)]
    work = Path(tempfile.mkdtemp(prefix="sr-bench-spot-"))
    print("reference: an uninterrupted digits-fast run ...", flush=True)
    reference = spotlab.reference_metrics(work / "reference")
    rows = []
    try:
        for name in names:
            for repeat in range(args.repeats):
                root = Path(tempfile.mkdtemp(prefix="sr-lab-", dir="/tmp"))
                with Lab(root) as lab:
                    env = make_env(work / f"{len(rows)}", lab)
                    scenario = spotlab.Scenario(name, env, lab)
                    started = time.monotonic()
                    try:
                        spotlab.SCENARIOS[name](scenario)
                        out = scenario.finish(reference)
                    except AssertionError as exc:
                        out = spotlab.Outcome(name, state=f"error: {exc}")
                        out.wall_s = time.monotonic() - started
                    rows.append(out)
                    print(f"[{name} #{repeat + 1}] {'OK' if out.ok else 'FAILED'}", flush=True)
                    if args.verbose or not out.ok:
                        print(out, flush=True)
                shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    header = (
        f"{'scenario':<46} {'outcome':<9} {'metrics':<8} {'inst':>4} {'left':>4} "
        f"{'fault->request s':>17} {'fault->running s':>17} {'steps lost':>11} "
        f"{'restored':>9} {'wall s':>7}"
    )
    print(header)
    print("-" * len(header))
    for out in rows:
        print(
            f"{out.scenario:<46} {('ok' if out.ok else out.state)[:9]:<9} "
            f"{'equal' if out.metrics_equal else 'DIFFER':<8} {out.instances:>4} "
            f"{out.left_running:>4} {fmt(out.to_request_s):>17} {fmt(out.to_resumed_s):>17} "
            f"{','.join(map(str, out.lost_steps)) or '-':>11} "
            f"{','.join(out.restored_from) or '-':>9} {out.wall_s:>7.1f}"
        )
    requests = [t for out in rows for t in out.to_request_s]
    resumed = [t for out in rows for t in out.to_resumed_s]
    if requests:
        print(
            f"\nfault -> replacement requested: median {statistics.median(requests):.1f} s, "
            f"max {max(requests):.1f} s (target <= 10 s); fault -> job running on the "
            f"replacement: median {statistics.median(resumed):.1f} s, max {max(resumed):.1f} s"
        )
    print(f"{sum(o.ok for o in rows)}/{len(rows)} scenarios passed every check")
    return 0 if all(o.ok for o in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
