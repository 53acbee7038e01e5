"""Bad input: one clear line on stderr, no traceback, the right exit code, nothing launched."""

from __future__ import annotations

import sqlite3

import pytest

from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.runstates import RunState
from spotrun.store.ledger import Ledger
from tests.conftest import Env


def assert_one_line_error(proc, code: int, *fragments: str) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["launch", "digits-fsat"], ["unknown recipe 'digits-fsat'", "did you mean digits-fast"]),
        (
            ["launch", "digits-fast", "--set", "lrr=0.1"],
            ["unknown --set key 'lrr'", "did you mean lr"],
        ),
        (
            ["launch", "digits-fast", "--set", "epochs=many"],
            ["--set epochs", "expected an integer", "'many'"],
        ),
        (["launch", "digits-fast", "--set", "lr=fast"], ["--set lr", "expected a number"]),
        (["launch", "digits-fast", "--gpus", "-2"], ["--gpus must be 0 or more", "got -2"]),
        (["launch", "digits-fast", "--gpus", "two"], ["--gpus"]),
        (["launch", "digits-fast", "--gpus", "4"], ["has 0 GPU(s)", "--cloud aws"]),
        (["launch", "digits-fast", "--cloud", "gcp"], ["--cloud", "gcp"]),
        (["launch", "digits-fast", "--name", "Bad Name!"], ["name"]),
        (["launch", "digits-fast", "--set", "methods.mixup2={}"], ["unknown method 'mixup2'"]),
        (["status", "nosuchrun"], ["no run named 'nosuchrun'"]),
        (["logs", "nosuchrun"], ["no run named 'nosuchrun'"]),
        (["attach", "nosuchrun"], ["no run named 'nosuchrun'"]),
        (["stop", "nosuchrun"], ["no run named 'nosuchrun'"]),
        (["cost", "nosuchrun"], ["no run named 'nosuchrun'"]),
        (["resume", "nosuchrun"], ["no run named 'nosuchrun'"]),
        (["rm", "nosuchrun"], ["no run named 'nosuchrun'"]),
        (["frobnicate"], ["No such command"]),
    ],
)
def test_usage_errors(env: Env, args: list[str], fragments: list[str]) -> None:
    before = env.runs()
    proc = env.cli(*args)
    assert_one_line_error(proc, 2, *fragments)
    assert env.runs() == before == []
    assert env.sessions() == []


def _ledger(env: Env) -> Ledger:
    return Ledger(load_settings(env.home))


def test_ambiguous_run_prefix(env: Env) -> None:
    ledger = _ledger(env)
    ledger.create_run(LaunchSpec(recipe="digits-fast"), run_id="ab0000000001")
    ledger.create_run(LaunchSpec(recipe="digits-fast"), run_id="ab0000000002")
    for state in (RunState.FAILED,):
        ledger.transition("ab0000000001", state)
        ledger.transition("ab0000000002", state)
    proc = env.cli("status", "ab00")
    assert_one_line_error(proc, 2, "'ab00' is ambiguous", "ab0000000001", "ab0000000002")
    assert env.cli("status", "ab0000000002").returncode == 0


def test_attach_to_a_finished_run(env: Env) -> None:
    ledger = _ledger(env)
    run = ledger.create_run(LaunchSpec(recipe="digits-fast", name="done"))
    ledger.transition(run.id, RunState.FAILED, "it broke")
    proc = env.cli("attach", "done")
    assert_one_line_error(proc, 1, "has ended (failed)", "spotrun logs done")
    assert env.cli("stop", "done").returncode == 1


def test_corrupt_ledger(env: Env) -> None:
    env.home.mkdir(parents=True)
    (env.home / "ledger.db").write_bytes(b"\x00garbage" * 500)
    for args in (["ls"], ["launch", "digits-fast"]):
        proc = env.cli(*args)
        assert_one_line_error(proc, 1, "not a readable spotrun ledger", "move it aside")
    assert (env.home / "ledger.db").read_bytes() == b"\x00garbage" * 500
    assert env.sessions() == []


def test_ledger_from_a_newer_version(env: Env) -> None:
    ledger = _ledger(env)
    ledger.create_run(LaunchSpec(recipe="digits-fast", name="keep-me"))
    ledger.close()
    with sqlite3.connect(env.home / "ledger.db") as db:
        db.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    proc = env.cli("launch", "digits-fast")
    assert_one_line_error(proc, 1, "newer spotrun", "upgrade spotrun")
    with sqlite3.connect(env.home / "ledger.db") as db:
        assert db.execute("SELECT name FROM runs").fetchall() == [("keep-me",)]
    assert env.sessions() == []


def test_spotrun_home_not_writable(env: Env) -> None:
    env.home.parent.mkdir(parents=True, exist_ok=True)
    blocker = env.home.parent / "a-file"
    blocker.write_text("not a folder")
    env.vars["SPOTRUN_HOME"] = str(blocker / "home")
    proc = env.cli("launch", "digits-fast")
    assert_one_line_error(proc, 1, "SPOTRUN_HOME", "folder you can write")
    env.vars["SPOTRUN_HOME"] = "/proc/spotrun-home"  # a read-only filesystem, even for root
    proc = env.cli("ls")
    assert_one_line_error(proc, 1, "SPOTRUN_HOME")
    assert env.sessions() == []


def test_bad_config_file_names_the_key(env: Env) -> None:
    env.home.mkdir(parents=True)
    (env.home / "config.toml").write_text('default_cloud = "local"\nbogus_key = 1\n')
    proc = env.cli("ls")
    assert_one_line_error(proc, 2, "config.toml", "unknown key 'bogus_key'")
