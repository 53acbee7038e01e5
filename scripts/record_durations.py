"""Record each test's time from a pytest log, for the suite's order (tests/suite_order.py).

    .venv/bin/python -m pytest -q -n 3 --dist worksteal --durations=0 2>&1 | tee suite.log
    .venv/bin/python scripts/record_durations.py suite.log        # writes tests/durations.json

With `--cpu-log FILE` (a run with SPOTRUN_TEST_CPU_LOG=FILE, tests/cpu_record.py) it also writes
tests/cpu_seconds.json: each test's CPU seconds, with everything it started.

A test's time is its setup, call and teardown summed, in seconds rounded to 0.1. pytest hides
the phases under 0.005 s (and --durations=N shows only N lines): a test missing from the log
counts as the median of its kind when the suite is ordered.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# `12.34s call     tests/e2e/test_x.py::test_y[param]`, as pytest's --durations prints it.
PHASE_LINE = re.compile(r"^(?P<seconds>\d+(\.\d+)?)s (setup|call|teardown)\s+(?P<nodeid>\S.*)$")


def durations_in(log: str) -> dict[str, float]:
    """Node id -> its phases' seconds summed, rounded to 0.1, from a log's --durations lines."""
    summed: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        found = PHASE_LINE.match(line.rstrip())
        if found:
            summed[found["nodeid"]] += float(found["seconds"])
    return {nodeid: round(seconds, 1) for nodeid, seconds in sorted(summed.items())}


def cpu_seconds_in(log: str) -> dict[str, float]:
    """Node id -> CPU seconds, from tests/cpu_record.py's lines (the last of a test repeated)."""
    found: dict[str, float] = {}
    for line in log.splitlines():
        fields = line.split("\t")
        if len(fields) == 3:
            found[fields[0]] = round(float(fields[1]), 1)
    return dict(sorted(found.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="a pytest log with --durations=0 output")
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "durations.json")
    parser.add_argument("--cpu-log", type=Path, help="SPOTRUN_TEST_CPU_LOG's file of the run")
    parser.add_argument("--cpu-out", type=Path, default=REPO / "tests" / "cpu_seconds.json")
    args = parser.parse_args()
    recorded = durations_in(args.log.read_text(errors="replace"))
    if not recorded:
        print(f"error: no --durations lines in {args.log}", file=sys.stderr)
        return 1
    args.out.write_text(json.dumps(recorded, indent=0) + "\n")
    print(f"{len(recorded)} tests, {sum(recorded.values()):.0f} s in all -> {args.out}")
    if args.cpu_log is not None:
        cpu = cpu_seconds_in(args.cpu_log.read_text(errors="replace"))
        args.cpu_out.write_text(json.dumps(cpu, indent=0) + "\n")
        print(f"{len(cpu)} tests, {sum(cpu.values()):.0f} CPU-s in all -> {args.cpu_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
