from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.errors import LedgerError, NotFoundError, StateError, UsageError
from spotrun.core.runstates import ALLOWED, TERMINAL, RunState, check_transition
from spotrun.store.ledger import Ledger


def test_terminal_states_allow_no_move() -> None:
    for state in TERMINAL:
        assert not ALLOWED[state]
        with pytest.raises(StateError):
            check_transition(state, RunState.RUNNING)


def test_every_state_is_in_the_table_and_can_end() -> None:
    for state in RunState:
        assert state in ALLOWED
        if state not in TERMINAL:
            assert RunState.FAILED in ALLOWED[state] and RunState.STOPPED in ALLOWED[state]


def test_illegal_transition_message_lists_allowed() -> None:
    with pytest.raises(StateError, match="from planned it may move to"):
        check_transition(RunState.PLANNED, RunState.SUCCEEDED)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(load_settings(tmp_path / "home"))


def test_transitions_are_recorded_with_times(ledger: Ledger) -> None:
    run = ledger.create_run(LaunchSpec(recipe="digits-fast"))
    for state in (RunState.REQUESTED, RunState.PROVISIONING, RunState.RUNNING):
        ledger.transition(run.id, state, "why")
    with pytest.raises(StateError):
        ledger.transition(run.id, RunState.PLANNED)
    moves = ledger.transitions(run.id)
    assert [m.to_state for m in moves] == [
        RunState.PLANNED,
        RunState.REQUESTED,
        RunState.PROVISIONING,
        RunState.RUNNING,
    ]
    assert all(a.at <= b.at for a, b in zip(moves, moves[1:]))
    assert ledger.get_run(run.id).started_at is not None


def test_the_controllers_light_reads_agree_with_the_whole_run(ledger: Ledger) -> None:
    """What the controller reads each poll (state_of) and each second (active_run_sweeps)
    without parsing whole runs says what get_run and active_runs say."""
    first = ledger.create_run(LaunchSpec(recipe="digits-fast"))
    second = ledger.create_run(LaunchSpec(recipe="digits-fast"), sweep_id="sw1")
    ledger.transition(first.id, RunState.REQUESTED)
    assert ledger.state_of(first.id) == (RunState.REQUESTED, False)
    ledger.request_stop(first.id, "enough")
    assert ledger.state_of(first.id) == (RunState.REQUESTED, True)
    whole = ledger.get_run(first.id)
    assert (whole.state, whole.stop_requested) == ledger.state_of(first.id)
    assert ledger.active_run_sweeps() == {first.id: None, second.id: "sw1"}
    assert list(ledger.active_run_sweeps()) == [r.id for r in ledger.active_runs()]
    ledger.transition(first.id, RunState.STOPPED)
    assert ledger.active_run_sweeps() == {second.id: "sw1"}
    with pytest.raises(NotFoundError):
        ledger.state_of("nosuchrun")


def test_concurrent_writers_never_both_win(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "home")
    run = Ledger(settings).create_run(LaunchSpec(recipe="digits-fast"))
    Ledger(settings).transition(run.id, RunState.REQUESTED)
    wins: list[RunState] = []
    errors: list[Exception] = []

    def worker(target: RunState) -> None:
        ledger = Ledger(settings)
        try:
            ledger.transition(run.id, target)
            wins.append(target)
        except StateError as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=worker, args=(t,)) for t in (RunState.FAILED, RunState.STOPPED) * 4
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(errors) == 7


def test_resolve_by_name_id_and_prefix(ledger: Ledger) -> None:
    a = ledger.create_run(LaunchSpec(recipe="digits-fast", name="first"), run_id="abc111000000")
    b = ledger.create_run(LaunchSpec(recipe="digits-fast"), run_id="abc222000000")
    assert ledger.resolve("first").id == a.id
    assert ledger.resolve("abc2").id == b.id
    assert ledger.resolve(b.name).id == b.id
    with pytest.raises(NotFoundError, match="ambiguous"):
        ledger.resolve("abc")
    with pytest.raises(NotFoundError, match="no run named"):
        ledger.resolve("zzz")
    with pytest.raises(NotFoundError):
        ledger.resolve("%")  # LIKE wildcards are taken literally


def test_a_live_runs_name_is_refused_an_ended_ones_taken_by_the_newest(ledger: Ledger) -> None:
    first = ledger.create_run(LaunchSpec(recipe="digits-fast", name="same"))
    with pytest.raises(UsageError, match="a live run keeps its name"):
        ledger.create_run(LaunchSpec(recipe="digits-fast", name="same"))
    ledger.transition(first.id, RunState.STOPPED)
    second = ledger.create_run(LaunchSpec(recipe="digits-fast", name="same"))
    ledger.transition(second.id, RunState.FAILED)
    third = ledger.create_run(LaunchSpec(recipe="digits-fast", name="same"))
    names = [ledger.get_run(r.id).name for r in (first, second, third)]
    assert names == ["same-1", "same-2", "same"]  # numbered in the order they were launched
    (note,) = [e.message for e in ledger.events(third.id) if e.kind == "name"]
    assert note == "took the name 'same'; the ended run that had it is now 'same-2'"


def test_corrupt_ledger_is_reported_not_replaced(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "ledger.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LedgerError, match="not a readable spotrun ledger"):
        Ledger(load_settings(home))
    assert (home / "ledger.db").read_bytes().startswith(b"this is not sqlite")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "home")
    Ledger(settings).close()
    with sqlite3.connect(settings.ledger_path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(LedgerError, match="newer spotrun"):
        Ledger(settings)


def test_unwritable_home(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(LedgerError, match="cannot create SPOTRUN_HOME"):
        Ledger(load_settings(blocker / "home"))


HOLD_LOCK = """
import fcntl, sys, threading, time
fh = open(sys.argv[1], "a")
fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
for _ in range(8):  # threads busy in Python, as a supervisor's are
    threading.Thread(target=lambda: sum(i * i for i in range(10**9)), daemon=True).start()
print("held", flush=True)
time.sleep(600)
"""


def test_a_killed_supervisors_lock_counts_as_free_at_once(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from spotrun.core.locks import lock_is_held, process_running

    lock = tmp_path / "supervisor.lock"
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        assert lock_is_held(lock, proc.pid)
        proc.send_signal(signal.SIGKILL)
        while process_running(proc.pid):
            pass  # the moment its main thread is a zombie: what the next command may see
        assert not lock_is_held(lock, proc.pid)  # not reaped yet, and free all the same
        proc.wait()
