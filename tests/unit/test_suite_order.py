"""The suite's order (tests/suite_order.py): pytest-xdist's worksteal hands each worker one
contiguous chunk first, so every chunk must start with its long tests and end with short ones,
and tests that share a module fixture must stay together."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys

from spotlab.harness import REPO
from tests.suite_order import (
    SuiteTest,
    estimates,
    first_chunk_sizes,
    load_durations,
    suite_order,
)

LOG = """\
============================== slowest durations ===============================
30.00s call     tests/e2e/test_a.py::test_long
2.04s setup    tests/e2e/test_a.py::test_long
0.10s teardown tests/e2e/test_a.py::test_long
0.50s call     tests/unit/test_b.py::test_case[with space]
(120 durations < 0.005s hidden.  Use -vv to show these durations.)
"""


def _quick(name: str, *fixtures: str) -> SuiteTest:
    return SuiteTest(f"tests/unit/test_q.py::{name}", slow=False, fixtures=frozenset(fixtures))


def _slow(name: str) -> SuiteTest:
    return SuiteTest(f"tests/e2e/test_s.py::{name}", slow=True)


def test_each_workers_first_chunk_starts_with_one_of_the_long_tests() -> None:
    tests = [_slow(f"long{i}") for i in range(3)] + [_quick(f"q{i}") for i in range(9)]
    durations = {"tests/e2e/test_s.py::long0": 100.0, "tests/e2e/test_s.py::long1": 90.0}
    durations |= {"tests/e2e/test_s.py::long2": 80.0}
    durations |= {t.nodeid: 1.0 + i / 10 for i, t in enumerate(tests[3:])}
    order = suite_order(tests, durations, workers=3)
    assert sorted(order) == list(range(12))
    chunks = [order[0:4], order[4:8], order[8:12]]
    assert first_chunk_sizes(12, 3) == [4, 4, 4]
    assert sorted(chunk[0] for chunk in chunks) == [0, 1, 2]  # one long test leads each chunk
    for chunk in chunks:
        times = [durations[tests[i].nodeid] for i in chunk]
        assert times == sorted(times, reverse=True)  # short ones last, where steals take them


def test_long_tests_that_mostly_wait_share_the_first_chunk_while_it_has_time() -> None:
    # Six long tests: three busy all the time, three that wait (a notice's real seconds). By
    # time alone each chunk would start with one of each kind; with their CPU recorded, the
    # waiting ones go to the first chunk and the busy ones lead the others, so that one worker
    # waits while two keep the cores busy.
    tests = [_slow(f"busy{i}") for i in range(3)] + [_slow(f"waits{i}") for i in range(3)]
    tests += [_quick(f"q{i}") for i in range(6)]
    durations = {t.nodeid: 60.0 - i for i, t in enumerate(tests[:3])}
    durations |= {t.nodeid: 31.0 - i for i, t in enumerate(tests[3:6])}
    durations |= {t.nodeid: 1.0 for t in tests[6:]}
    cpu = {t.nodeid: durations[t.nodeid] * 0.9 for t in tests[:3] + tests[6:]}
    cpu |= {t.nodeid: 3.0 for t in tests[3:6]}
    chunks = _chunks(suite_order(tests, durations, workers=3, cpu=cpu), [4, 4, 4])
    assert sorted(chunks[0][:3]) == [3, 4, 5]  # the three that wait, in the first chunk
    assert sorted([chunks[1][0], chunks[2][0]]) == [0, 1]  # busy ones lead the other two
    for chunk in chunks:
        times = [durations[tests[i].nodeid] for i in chunk]
        assert times == sorted(times, reverse=True)
    # Without CPU records (or with one missing) the deal is by time alone.
    by_time = _chunks(suite_order(tests, durations, workers=3), [4, 4, 4])
    assert sorted(chunk[0] for chunk in by_time) == [0, 1, 2]
    del cpu[tests[4].nodeid]
    partly = _chunks(suite_order(tests, durations, workers=3, cpu=cpu), [4, 4, 4])
    assert 4 not in partly[0][:2]


def test_waiting_tests_fill_the_first_chunk_only_up_to_its_share() -> None:
    tests = [_slow(f"waits{i}") for i in range(3)] + [_quick(f"q{i}") for i in range(6)]
    durations = {t.nodeid: 50.0 for t in tests[:3]} | {t.nodeid: 2.0 for t in tests[3:]}
    cpu = {t.nodeid: 1.0 for t in tests}  # all wait; the first chunk can take one of them
    chunks = _chunks(suite_order(tests, durations, workers=3, cpu=cpu), [3, 3, 3])
    assert sorted(chunk[0] for chunk in chunks) == [0, 1, 2]


def _chunks(order: list[int], sizes: list[int]) -> list[list[int]]:
    assert sorted(order) == list(range(sum(sizes)))
    chunks, start = [], 0
    for size in sizes:
        chunks.append(order[start : start + size])
        start += size
    return chunks


def test_tests_sharing_a_module_fixture_stay_together_in_file_order() -> None:
    served, browser = "tests/unit/test_q.py::served", "tests/unit/test_q.py::browser"
    tests = [_quick("alone"), _quick("a", served), _quick("b", served, browser)]
    tests += [_quick("c", browser)]  # shares the browser with b, and so b's server too
    tests += [_quick(f"other{i}") for i in range(5)]
    durations = {t.nodeid: 5.0 for t in tests} | {tests[0].nodeid: 20.0}
    order = suite_order(tests, durations, workers=3)
    place = order.index(1)
    assert order[place : place + 3] == [1, 2, 3]
    chunk_starts = (0, 3, 6)  # first_chunk_sizes(9, 3): the group fits inside one chunk
    assert place in chunk_starts


def test_without_xdist_the_longest_tests_run_first() -> None:
    tests = [_quick("short"), _slow("long"), _quick("middle")]
    durations = {tests[0].nodeid: 0.1, tests[1].nodeid: 50.0, tests[2].nodeid: 3.0}
    assert suite_order(tests, durations, workers=1) == [1, 2, 0]


def test_a_test_without_a_record_counts_as_the_median_of_its_kind() -> None:
    tests = [_slow("s1"), _slow("s2"), _slow("s3"), _slow("new"), _quick("q1"), _quick("new")]
    durations = {tests[0].nodeid: 10.0, tests[1].nodeid: 40.0, tests[2].nodeid: 20.0}
    durations[tests[4].nodeid] = 0.3
    assert estimates(tests, durations) == [10.0, 40.0, 20.0, 20.0, 0.3, 0.3]


def test_record_durations_sums_a_tests_phases_from_the_log() -> None:
    durations_in = runpy.run_path(str(REPO / "scripts" / "record_durations.py"))["durations_in"]
    assert durations_in(LOG) == {
        "tests/e2e/test_a.py::test_long": 32.1,
        "tests/unit/test_b.py::test_case[with space]": 0.5,
    }


def test_record_durations_reads_cpu_seconds_from_the_cpu_log() -> None:
    cpu_seconds_in = runpy.run_path(str(REPO / "scripts" / "record_durations.py"))["cpu_seconds_in"]
    log = (
        "tests/e2e/test_a.py::test_long\t61.04\t32.10\nnot a line\ntests/x.py::t[a b]\t0.26\t1.0\n"
    )
    assert cpu_seconds_in(log) == {
        "tests/e2e/test_a.py::test_long": 61.0,
        "tests/x.py::t[a b]": 0.3,
    }


def test_an_xdist_workers_collection_is_dealt_into_its_chunks_after_k_deselects() -> None:
    # What a worker of `-n 3` collects (xdist tells it the count), of two quick modules less
    # the eight cases -k leaves out: the chunks are cut from what runs, not from all collected.
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-k", "not task_file_errors", "tests/unit/cli/test_completion.py"]
        + ["tests/unit/jobs/test_own_command.py"],
        env={**os.environ, "PYTEST_XDIST_WORKER_COUNT": "3"},
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    order = [line for line in collected.stdout.splitlines() if "::" in line]
    seconds = estimates([SuiteTest(nodeid, slow=False) for nodeid in order], load_durations())
    chunks, start = [], 0
    for size in first_chunk_sizes(len(order), 3):
        chunks.append(seconds[start : start + size])
        start += size
    assert sorted(chunk[0] for chunk in chunks) == sorted(seconds)[-3:]  # one long test each
    assert all(chunk == sorted(chunk, reverse=True) for chunk in chunks)
