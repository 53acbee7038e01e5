"""Ctrl-C early in a foreground `spotrun launch` (issue 38, point 7): the run and its folder
appear together or not at all, and the launch always says what it left behind: "nothing was
launched", or the run that goes on detached (driven by its supervisor) and how to follow it.

The launch is the real CLI in a child process, sent SIGINT at many early moments; the ledger is
read with sqlite3 straight away (before any other command could restart a supervisor)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from tests.conftest import Env
from tests.helpers import WAIT_SCALE, wait_for

pytestmark = pytest.mark.slow

LAUNCH = ("launch", "digits-fast", "--cloud", "local")
NOTHING = "nothing was launched"


@dataclass
class Launch:
    """A foreground launch in a child process, its output read as it comes."""

    proc: subprocess.Popen[str]
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    readers: list[threading.Thread] = field(default_factory=list)

    @classmethod
    def start(cls, env: Env, name: str) -> Launch:
        launch = cls(env.popen(*LAUNCH, "--name", name))
        for stream, lines in ((launch.proc.stdout, launch.out), (launch.proc.stderr, launch.err)):
            reader = threading.Thread(target=_read_into, args=(stream, lines), daemon=True)
            reader.start()
            launch.readers.append(reader)
        return launch

    def interrupt(self) -> int:
        """SIGINT, as Ctrl-C sends it; the exit code once the launch has ended."""
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=90 * WAIT_SCALE)
        for reader in self.readers:
            reader.join(timeout=30 * WAIT_SCALE)
        return code


def _read_into(stream: object, lines: list[str]) -> None:
    lines.extend(iter(stream.readline, ""))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Row:
    name: str
    state: str
    supervisor_pid: int | None


def _rows(env: Env) -> dict[str, Row]:
    """The ledger's runs by id, read directly (no spotrun command: nothing is revived)."""
    path = env.home / "ledger.db"
    if not path.exists():
        return {}
    with closing(sqlite3.connect(path, timeout=60)) as db:
        try:
            found = db.execute("SELECT id, name, state, supervisor_pid FROM runs").fetchall()
        except sqlite3.OperationalError:  # no tables yet
            return {}
    return {run_id: Row(name, state, pid) for run_id, name, state, pid in found}


def _folders(env: Env) -> set[str]:
    runs = env.home / "runs"
    return {p.name for p in runs.iterdir()} if runs.exists() else set()


def _has_open(pid: int, path: Path) -> bool:
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd) == str(path):
                return True
        except OSError:
            continue
    return False


def _await(moment: Callable[[], bool], what: str) -> None:
    bound = 60 * WAIT_SCALE
    deadline = time.monotonic() + bound
    while not moment():  # polled finely: the moments last milliseconds
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {bound:.0f}s waiting for {what}")
        time.sleep(0.002)


def _check_left_behind(env: Env, launch: Launch, name: str, code: int) -> bool:
    """What the interrupted launch left and said agree; True when the run was launched."""
    err = "".join(launch.err)
    rows = _rows(env)
    assert code == 130, (code, err)
    assert _folders(env) == set(rows), "every run has its folder, and no folder lacks its run"
    mine = [row for row in rows.values() if row.name == name]
    if NOTHING in err:
        assert not mine, err
        assert "detached" not in err
        return False
    assert len(mine) == 1, f"no run and no '{NOTHING}':\n{err}"
    assert "detached" in err and f"spotrun logs -f {name}" in err, err
    assert mine[0].supervisor_pid is not None, "the launched run was handed to its supervisor"
    return True


def _controller_log(env: Env) -> str:
    path = env.home / "controller.log"
    return path.read_text() if path.exists() else ""


def _opened_then(ledger: Path, delay: float) -> Callable[[Launch], bool]:
    """The moment `delay` s after the launch opened the ledger."""

    def moment(launch: Launch) -> bool:
        if not _has_open(launch.proc.pid, ledger):
            return False
        time.sleep(delay)  # the chosen moment itself (the test's input), not a wait for an event
        return True

    return moment


def test_ctrl_c_at_any_early_moment_leaves_a_whole_run_or_nothing(env: Env) -> None:
    ledger = env.home / "ledger.db"
    rows_before: list[set[str]] = []
    moments: list[tuple[str, Callable[[Launch], bool]]] = [
        ("it opened the ledger", lambda launch: _has_open(launch.proc.pid, ledger)),
    ]
    for delay in (0.05, 0.15, 0.3, 0.45, 0.6, 0.8, 1.0, 1.3, 1.7):
        moments.append((f"{delay} s after it opened the ledger", _opened_then(ledger, delay)))
    moments += [
        ("its run folder appeared", lambda launch: len(_folders(env)) > len(rows_before[-1])),
        ("its run was recorded", lambda launch: len(_rows(env)) > len(rows_before[-1])),
        ("it printed the run's id", lambda launch: any(x.startswith("run ") for x in launch.out)),
    ]
    outcomes = []
    for index, (what, moment) in enumerate(moments):
        name = f"ci{index}"
        rows_before.append(set(_rows(env)))
        launch = Launch.start(env, name)
        try:
            _await(partial(moment, launch), what)
            code = launch.interrupt()
        finally:
            if launch.proc.poll() is None:
                launch.proc.kill()
        launched = _check_left_behind(env, launch, name, code)
        outcomes.append((what, launched))
        if launched:
            stopped = env.cli("stop", name)
            assert stopped.returncode == 0 or "already ended" in stopped.stderr, stopped.stderr
    log = _controller_log(env)
    assert "FileNotFoundError" not in log and "stopped with an error" not in log, log
    for run in env.runs():
        assert run["state"] in ("stopped", "succeeded"), run
    assert _folders(env) == {run["id"] for run in env.runs()}
    print(outcomes)  # which moments launched a run (shown with -s)


def _prewarmed_child(pid: int) -> int | None:
    """The per-run supervisor the launch started to warm up meanwhile, if it runs."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"--prewarm" in cmdline:
            return int(proc.name)
    return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ctrl_c_while_the_run_is_being_recorded_leaves_nothing_half_made(env: Env) -> None:
    """Another process holds the ledger's write lock (a user's sqlite3 shell, a backup), so the
    launch waits inside recording its run, its folder already made; Ctrl-C there takes the
    folder away again and says nothing was launched. The launch gets that far because what it
    reads before (the pools' history for its plan) opens the ledger without a write lock: the
    lock is taken before the launch starts, so nothing races."""
    env.home.mkdir(parents=True, exist_ok=True)
    (env.home / "config.toml").write_text('controller = "per-run"\n')
    env.cli("ls", check=True)  # the ledger made and current: opening it takes no write lock
    folders_before = _folders(env)
    holder = sqlite3.connect(env.home / "ledger.db", timeout=60, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    launch = Launch.start(env, "held")
    try:
        try:
            prewarmed = wait_for(
                lambda: _prewarmed_child(launch.proc.pid),
                timeout=60,
                what="the launch's warm supervisor",
                interval=0.01,
            )
            wait_for(
                lambda: _folders(env) - folders_before,
                timeout=60,
                what="the launch to make its run folder and wait for the ledger",
                interval=0.01,
            )
            assert launch.proc.poll() is None, "the launch ended without the ledger"
            code = launch.interrupt()  # while the ledger is still held
            assert _folders(env) == folders_before, "the run folder was taken away"
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    finally:
        if launch.proc.poll() is None:
            launch.proc.kill()
    err = "".join(launch.err)
    assert code == 130 and NOTHING in err and "detached" not in err, (code, err)
    assert "held" not in {run["name"] for run in env.runs()}
    assert _folders(env) == folders_before
    wait_for(lambda: not _alive(prewarmed), timeout=60, what="the warm supervisor to exit")
