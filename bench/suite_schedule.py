"""How long the suite's workers take under each order, replayed on the recorded durations.

    PYTHONPATH=. .venv/bin/python bench/suite_schedule.py [--workers 3] [PYTEST_ARGS...]

Collects the suite (or the tests PYTEST_ARGS name, e.g. `tests/e2e/test_spot_recovery.py`),
then replays pytest-xdist's worksteal scheduler (xdist/scheduler/worksteal.py: equal-count
contiguous first chunks; a worker with fewer than two tests left asks the longest queue for its
back half, the global queue shared out first) on tests/durations.json's times, for the order
before durations (slow tests first, in file order) and the order tests/suite_order.py makes.
It prints each order's makespan (when the last worker ends), each worker's end, and how often a
module fixture is built (again each time a worker comes back to its module). The replay answers
steals at once and knows no contention: a test takes its recorded time whatever runs beside it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.suite_order import (  # noqa: E402
    SuiteTest,
    estimates,
    load_durations,
    slow_first_order,
    suite_order,
    suite_test,
)

MIN_PENDING = 2  # worksteal's: the test running and the next one


class _FileOrder:
    """A pytest plugin that keeps the collected tests as the files list them."""

    def __init__(self) -> None:
        self.tests: list[SuiteTest] = []

    @pytest.hookimpl(tryfirst=True)  # before the suite's conftest orders them
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.tests = [suite_test(item) for item in items]


def collect(pytest_args: Sequence[str]) -> list[SuiteTest]:
    plugin = _FileOrder()
    code = pytest.main(
        ["--collect-only", "-q", "-p", "no:cacheprovider", *pytest_args], plugins=[plugin]
    )
    if code != 0:
        sys.exit(f"error: collection failed ({code})")
    return plugin.tests


def replay(seconds: Sequence[float], workers: int) -> tuple[list[list[int]], list[float]]:
    """The items (indices into `seconds`, in run order) each worker runs under worksteal, and
    when each worker ends its last."""
    pending = list(range(len(seconds)))  # not yet handed to a worker
    queues: list[list[int]] = [[] for _ in range(workers)]  # [0] is running
    shut = [False] * workers
    ran: list[list[int]] = [[] for _ in range(workers)]
    ends = [0.0] * workers  # when each worker's running test ends
    finished = [0.0] * workers

    def hand_out(worker: int, count: int) -> None:
        queues[worker] += pending[:count]
        del pending[:count]

    def check_schedule() -> None:
        while True:
            up = [w for w in range(workers) if not shut[w]]
            idle = [w for w in up if len(queues[w]) < MIN_PENDING]
            if not idle:
                return
            if pending:
                for place, worker in enumerate(idle):
                    hand_out(worker, len(pending) // (len(idle) - place))
                idle = [w for w in up if len(queues[w]) < MIN_PENDING]
                if not idle:
                    return
            victim = max(up, key=lambda w: len(queues[w]))
            steal = min(len(queues[victim]) // 2, max(0, len(queues[victim]) - MIN_PENDING))
            if steal == 0:
                for worker in idle:
                    shut[worker] = True
                return
            pending.extend(queues[victim][-steal:])
            del queues[victim][-steal:]

    check_schedule()
    running = [bool(queue) for queue in queues]
    for worker in range(workers):
        if running[worker]:
            ends[worker] = seconds[queues[worker][0]]
    while any(running):
        worker = min((w for w in range(workers) if running[w]), key=lambda w: (ends[w], w))
        now = ends[worker]
        ran[worker].append(queues[worker].pop(0))
        finished[worker] = now
        running[worker] = False
        check_schedule()
        for other in range(workers):  # the one that ended, and any handed work while dry
            if not running[other] and queues[other]:
                running[other] = True
                ends[other] = now + seconds[queues[other][0]]
    return ran, finished


def fixture_builds(tests: Sequence[SuiteTest], ran: Sequence[Sequence[int]]) -> dict[str, int]:
    """Module fixture -> how often the workers built it: pytest tears one down when a worker's
    next test is in another module, and builds it again at its next user."""
    builds: dict[str, int] = {}
    for order in ran:
        alive: set[str] = set()
        for index in order:
            module = tests[index].nodeid.split("::")[0]
            alive = {fixture for fixture in alive if fixture.startswith(f"{module}::")}
            for fixture in tests[index].fixtures - alive:
                builds[fixture] = builds.get(fixture, 0) + 1
            alive |= tests[index].fixtures
    return builds


def report(
    name: str, tests: Sequence[SuiteTest], seconds: Sequence[float], order: list[int], workers: int
) -> float:
    positions, ends = replay([seconds[i] for i in order], workers)
    ran = [[order[i] for i in worker] for worker in positions]
    builds = fixture_builds(tests, ran)
    rebuilt = {fixture: count for fixture, count in builds.items() if count > 1}
    print(
        f"{name:>12}: makespan {max(ends):7.1f} s   workers end at "
        + ", ".join(f"{end:.0f}" for end in sorted(ends))
        + f"   module fixtures built {sum(builds.values())} times"
        + (f" (again: {rebuilt})" if rebuilt else "")
    )
    return max(ends)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3)
    args, pytest_args = parser.parse_known_args()
    tests = collect(pytest_args)
    durations = load_durations()
    seconds = estimates(tests, durations)
    known = sum(t.nodeid in durations for t in tests)
    total = sum(seconds)
    longest = max(seconds, default=0.0)
    print(
        f"{len(tests)} tests ({known} with a recorded time), {total:.0f} s of test time, "
        f"{args.workers} workers: no order beats {max(total / args.workers, longest):.0f} s"
    )
    before = report("slow first", tests, seconds, slow_first_order(tests), args.workers)
    after = report(
        "durations", tests, seconds, suite_order(tests, durations, args.workers), args.workers
    )
    print(f"makespan ratio durations/slow-first: {after / before:.3f}")


if __name__ == "__main__":
    main()
