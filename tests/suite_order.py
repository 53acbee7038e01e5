"""The order the suite's tests run in, so that pytest-xdist's workers end together (issue 37.7).

pytest-xdist's `--dist worksteal` first cuts the collected items into one contiguous chunk per
worker, of equal counts; a worker that runs dry then steals the back half of the longest queue.
So each chunk is given a fair share of the recorded time, its long tests first and its short
ones last: the steals near the end move short tests, and no worker starts a two-minute scenario
while the others have nothing left. Tests that share a module-scoped fixture stay next to each
other in one chunk: a worker builds such a fixture again each time its module comes back.

tests/durations.json holds each test's recorded time (scripts/record_durations.py writes it); a
test not in it counts as the median of the recorded ones of its kind (slow-marked or not).

Some long tests mostly wait (a notice's real seconds, a controller's poll): tests/cpu_seconds.json
holds each test's CPU seconds, and those that are busy for under WAITING_SHARE of their time are
dealt to the first chunk, so that one worker waits while the others' CPU-bound tests keep both
cores busy. Dealt by time alone, two of the three workers began the suite waiting (measured: the
cores ~58% busy for the first three minutes).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

DURATIONS_FILE = Path(__file__).with_name("durations.json")
CPU_SECONDS_FILE = Path(__file__).with_name("cpu_seconds.json")
# A group busy for less than this share of its recorded time mostly waits; only groups of at
# least WAITING_MIN_S count: a short wait leaves its worker idle for too little to matter.
WAITING_SHARE = 0.3
WAITING_MIN_S = 10.0

# Module fixtures whose value pytest-xdist's workers share through a file lock (the first to
# come trains it, the others read it): their tests may go to any worker at no extra cost.
SHARED_ACROSS_WORKERS = frozenset({"tests/e2e/test_spot_recovery.py::reference"})


@dataclass(frozen=True)
class SuiteTest:
    """What the order needs to know of one collected test."""

    nodeid: str
    slow: bool
    # The module- or class-scoped fixtures it uses ("tests/x.py::name"): the tests that share
    # one run next to each other, in one chunk.
    fixtures: frozenset[str] = frozenset()


def suite_test(item: pytest.Item) -> SuiteTest:
    """The test as the order sees it: its marker, and the module fixtures it shares."""
    slow = item.get_closest_marker("slow") is not None
    module = item.nodeid.split("::")[0]
    fixture_info = getattr(item, "_fixtureinfo", None)  # only pytest.Function items have one
    definitions = fixture_info.name2fixturedefs if fixture_info is not None else {}
    shared = {
        f"{module}::{name}"
        for name, defined in definitions.items()
        if defined[-1].scope in ("module", "class")
    }
    return SuiteTest(item.nodeid, slow, frozenset(shared - SHARED_ACROSS_WORKERS))


def load_durations(path: Path = DURATIONS_FILE) -> dict[str, float]:
    """Node id -> recorded seconds; none when the file is missing (a fresh order, file order)."""
    if not path.exists():
        return {}
    recorded: dict[str, float] = json.loads(path.read_text())
    return recorded


def load_cpu_seconds(path: Path = CPU_SECONDS_FILE) -> dict[str, float]:
    """Node id -> recorded CPU seconds (with all it started); none when the file is missing."""
    return load_durations(path)


def waiting_groups(
    tests: Sequence[SuiteTest],
    found: list[list[int]],
    walls: Sequence[float],
    cpu: Mapping[str, float],
) -> set[int]:
    """The positions in `found` of the groups that mostly wait: long, with every test's CPU
    recorded, busy for under WAITING_SHARE of their time (`walls`: each group's seconds)."""
    waiting = set()
    for position, group in enumerate(found):
        if walls[position] < WAITING_MIN_S or any(tests[i].nodeid not in cpu for i in group):
            continue
        if sum(cpu[tests[i].nodeid] for i in group) < WAITING_SHARE * walls[position]:
            waiting.add(position)
    return waiting


def estimates(tests: Sequence[SuiteTest], durations: Mapping[str, float]) -> list[float]:
    """Each test's expected seconds: its recorded time, else the median of its kind's."""
    medians = {}
    for slow in (True, False):
        known = [durations[t.nodeid] for t in tests if t.slow is slow and t.nodeid in durations]
        medians[slow] = statistics.median(known) if known else 0.0
    return [durations.get(t.nodeid, medians[t.slow]) for t in tests]


def groups(tests: Sequence[SuiteTest]) -> list[list[int]]:
    """The tests (indices, in file order) that run together because they share a fixture,
    directly or through another test; a test that shares none is a group alone."""
    leader = list(range(len(tests)))

    def find(index: int) -> int:
        while leader[index] != index:
            index = leader[index]
        return index

    first_user: dict[str, int] = {}
    for index, test in enumerate(tests):
        for fixture in sorted(test.fixtures):
            if fixture not in first_user:
                first_user[fixture] = index
            joined = sorted((find(index), find(first_user[fixture])))
            leader[joined[1]] = joined[0]
    members: dict[int, list[int]] = {}
    for index in range(len(tests)):
        members.setdefault(find(index), []).append(index)
    return list(members.values())


def first_chunk_sizes(count: int, workers: int) -> list[int]:
    """How many of `count` items worksteal hands each of `workers` idle workers at the start."""
    sizes = []
    for handed in range(workers):
        sizes.append(count // (workers - handed))
        count -= sizes[-1]
    return sizes


def suite_order(
    tests: Sequence[SuiteTest],
    durations: Mapping[str, float],
    workers: int,
    cpu: Mapping[str, float] | None = None,
) -> list[int]:
    """The indices of `tests` in the order to run them: one chunk per worker (of worksteal's
    first sizes), the groups dealt longest first to the chunk with the least time so far that
    has room, each chunk longest first. A group keeps its tests' file order. With `cpu`, the
    groups that mostly wait are dealt first, to the first chunk while they fit its share of the
    time: that chunk starts with them."""
    seconds = estimates(tests, durations)
    found = groups(tests)
    walls = [sum(seconds[i] for i in group) for group in found]
    waiting = waiting_groups(tests, found, walls, cpu or {}) if workers > 1 else set()
    by_length = sorted(range(len(found)), key=lambda position: -walls[position])
    room = first_chunk_sizes(len(tests), max(1, workers))
    share = sum(seconds) / len(room)
    loads = [0.0] * len(room)
    chunks: list[list[int]] = [[] for _ in room]

    def deal(worker: int, position: int) -> None:
        chunks[worker] += found[position]
        room[worker] -= len(found[position])
        loads[worker] += walls[position]

    # The waiting groups first, longest first, to the first chunk while they fit its share.
    dealt = set()
    for position in (g for g in by_length if g in waiting):
        if room[0] >= len(found[position]) and loads[0] + walls[position] <= share:
            deal(0, position)
            dealt.add(position)
    for position in (g for g in by_length if g not in dealt):
        fitting = [w for w in range(len(room)) if room[w] >= len(found[position])]
        # A group larger than every chunk's room left goes where the most room is: the counts
        # then shift by a few short tests at the chunk's end, which the steals even out.
        worker = (
            min(fitting, key=lambda w: (loads[w], w))
            if fitting
            else max(range(len(room)), key=lambda w: (room[w], -w))
        )
        deal(worker, position)
    return [index for chunk in chunks for index in chunk]


def slow_first_order(tests: Sequence[SuiteTest]) -> list[int]:
    """The order before recorded durations: slow tests first, each kind in file order
    (`SUITE_ORDER=slow-first` brings it back, to compare)."""
    return sorted(range(len(tests)), key=lambda index: not tests[index].slow)
