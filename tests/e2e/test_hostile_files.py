"""Damaged or hostile local files (config.toml, a task file, the ledger): one clear line, a
non-zero exit, nothing written (issue 18, class 4)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from spotrun.core.config import LaunchSpec, load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.e2e.test_bad_input import assert_one_line_error


def _config(env: Env, data: bytes) -> None:
    env.home.mkdir(parents=True, exist_ok=True)
    (env.home / "config.toml").write_bytes(data)


def test_a_config_file_that_is_not_utf8_or_sets_home(env: Env) -> None:
    _config(env, b'[aws]\nregion = "eu-\xff\xfe"\n')
    assert_one_line_error(env.cli("ls"), 2, "config.toml is not UTF-8 text", "UTF-8")
    _config(env, b'home = "/tmp/elsewhere"\n')
    assert_one_line_error(env.cli("ls"), 2, "'home' cannot be set", "SPOTRUN_HOME")
    assert not (env.home / "ledger.db").exists()


def test_a_task_file_that_is_not_utf8_launches_nothing(env: Env, tmp_path: Path) -> None:
    task = tmp_path / "task.yaml"
    task.write_bytes(b"name: x\nrun: echo \xc3\x28\nresources: {gpus: 0}\n")
    proc = env.cli("launch", str(task), "--cloud", "local", "-d")
    assert_one_line_error(proc, 2, "is not UTF-8 text")
    assert env.runs() == [] and env.sessions() == []


def _made(env: Env) -> Path:
    with Ledger(load_settings(env.home)) as ledger:
        for i in range(3):
            ledger.create_run(LaunchSpec(recipe="digits-fast", name=f"run-{i}"))
    return env.home / "ledger.db"


def test_a_ledger_with_one_damaged_page(env: Env) -> None:
    path = _made(env)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()
        (size,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    with open(path, "r+b") as fh:  # the runs table's page: the rest of the file stays good
        fh.seek((root - 1) * size)
        fh.write(b"\xa5" * size)
    before = path.read_bytes()
    for args in (["ls"], ["status", "run-1"]):
        assert_one_line_error(env.cli(*args), 1, "is damaged", "move it aside")
    assert path.read_bytes() == before


def test_a_ledger_whose_schema_version_is_not_a_number(env: Env) -> None:
    path = _made(env)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = 'three' WHERE key = 'schema_version'")
    db.close()
    assert_one_line_error(env.cli("ls"), 1, "schema version that is not a number", "'three'")
