"""Shared fixtures: an isolated SPOTRUN_HOME and tmux server per test, and the real CLI."""

from __future__ import annotations

import compileall
import gc
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotlab.harness import REPO, Env
from tests.cpu_record import install as install_cpu_record
from tests.immutable_files import ImmutableFiles
from tests.suite_order import (
    load_cpu_seconds,
    load_durations,
    slow_first_order,
    suite_order,
    suite_test,
)

# torch's OpenMP threads spin while they wait for work by default: on this 2-core machine,
# with several tests training at once, the spinning was half of a training's CPU time (digits-fast
# 2 epochs: 8-10 s of CPU, 4 s passive; identical losses). Every process the suite starts
# (the CLI, its controllers, local jobs, in-process training) inherits the passive wait.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# A test process holds moto, boto3 and torch: hundreds of thousands of long-lived objects that
# Python's default collections (one every 700 new objects) keep walking, while the lab's
# requests make objects fast: collecting was a third of a worker's CPU
# (tests/e2e/test_aws_input.py, one process: 3.6 s of 10.8 s; 0.7 s of 8.3 s with these).
gc.set_threshold(50_000, 50, 100)

# A suite started in the background by a non-interactive shell inherits SIGINT ignored, and so
# would every spotrun process a test starts: the Ctrl-C tests need Python's default back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    """Compile spotrun's and the lab's modules once, before any worker starts: with
    PYTHONDONTWRITEBYTECODE set (as on this machine), a fresh clone has no bytecode, and every
    spotrun process a test starts (CLI, controller, supervisor) would compile the modules it
    imports again: about a third of a command's CPU time."""
    if not hasattr(config, "workerinput"):  # an xdist worker's controller compiled them
        compile_sources()
    install_cpu_record(config)  # SPOTRUN_TEST_CPU_LOG: each test's CPU (tests/cpu_record.py)


def compile_sources() -> None:
    for package in ("spotrun", "spotlab"):
        compileall.compile_dir(REPO / package, quiet=1)


@pytest.hookimpl(trylast=True)  # after -k, -m and --deselect: the shares are of what runs
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each pytest-xdist worker's first share of the suite starts with long tests and ends with
    short ones, all shares of about equal recorded time (tests/suite_order.py): the workers end
    together, on short tests they steal from each other."""
    tests = [suite_test(item) for item in items]
    if os.environ.get("SUITE_ORDER") == "slow-first":
        order = slow_first_order(tests)
    else:
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # set in xdist's workers
        order = suite_order(tests, load_durations(), workers, load_cpu_seconds())
    items[:] = [items[index] for index in order]


def _kill_supervisors(home: Path) -> None:
    ledger = home / "ledger.db"
    if not ledger.exists():
        return
    import sqlite3

    try:
        with sqlite3.connect(ledger) as db:
            pids = [
                r[0]
                for r in db.execute(
                    "SELECT supervisor_pid FROM runs WHERE supervisor_pid IS NOT NULL"
                )
            ]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
            if "sweeps" in tables:  # a sweep's supervisor drives its trials itself
                pids += [
                    r[0]
                    for r in db.execute(
                        "SELECT supervisor_pid FROM sweeps WHERE supervisor_pid IS NOT NULL"
                    )
                ]
    except sqlite3.DatabaseError:
        return
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    home = tmp_path / "home"
    # tmux sockets live in TMUX_TMPDIR; unix socket paths must stay short, so not under tmp_path.
    tmux_dir = Path(tempfile.mkdtemp(prefix="sr-tmux-", dir="/tmp"))
    variables = {
        **os.environ,
        "SPOTRUN_HOME": str(home),
        "TMUX_TMPDIR": str(tmux_dir),
        "PYTHONPATH": str(REPO),
        "COLUMNS": "200",
    }
    variables.pop("TMUX", None)
    e = Env(home, tmux_dir, variables)
    old = {k: os.environ.get(k) for k in ("SPOTRUN_HOME", "TMUX_TMPDIR", "TMUX")}
    os.environ["SPOTRUN_HOME"] = str(home)
    os.environ["TMUX_TMPDIR"] = str(tmux_dir)
    os.environ.pop("TMUX", None)
    try:
        yield e
    finally:
        _kill_supervisors(home)
        e.tmux("kill-server")
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(tmux_dir, ignore_errors=True)


@pytest.fixture
def immutable() -> Iterator[ImmutableFiles]:
    """Files a test makes immutable, made mutable again whatever the test does."""
    files = ImmutableFiles()
    try:
        yield files
    finally:
        files.unlock_all()


from spotlab.fixtures import aws_env, lab, make_lab  # noqa: E402,F401  (the lab, for every test)
