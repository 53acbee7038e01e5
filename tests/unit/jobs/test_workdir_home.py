"""SPOTRUN_HOME inside a workdir never ships: its keys and ledger are not the job's, and reading
the ledger's files would drop the SQLite locks of a live connection in the same process."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from spotrun.core.errors import UsageError
from spotrun.jobs.workdir import list_files, manifest, write_archive


def _tree(root: Path) -> Path:
    (root / "train.py").write_text("print('hi')\n")
    home = root / "state"
    (home / "runs" / "abc").mkdir(parents=True)
    (home / "runs" / "abc" / "job.log").write_text("log\n")
    (home / "ledger.db").write_bytes(b"x")
    (root / "statement.txt").write_text("not the home, a sibling with its prefix\n")
    return home


def test_the_home_inside_the_workdir_is_left_out(tmp_path: Path) -> None:
    home = _tree(tmp_path)
    names = [f.path for f in list_files(tmp_path, home=home)]
    assert names == ["statement.txt", "train.py"]


def test_the_default_home_is_read_from_spotrun_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _tree(tmp_path)
    monkeypatch.setenv("SPOTRUN_HOME", str(home))
    assert [f.path for f in list_files(tmp_path)] == ["statement.txt", "train.py"]
    monkeypatch.setenv("SPOTRUN_HOME", str(tmp_path.parent / "elsewhere"))
    assert "state/ledger.db" in [f.path for f in list_files(tmp_path)]


def test_the_home_itself_as_workdir_is_refused(tmp_path: Path) -> None:
    home = _tree(tmp_path)
    with pytest.raises(UsageError, match="is SPOTRUN_HOME itself"):
        list_files(home, home=home)


def test_listing_a_workdir_holding_a_live_ledger_keeps_its_wal(tmp_path: Path) -> None:
    """The fault this guards: a connection whose locks were dropped loses its WAL to the next
    process that closes the database (it checkpoints and deletes it as the last user)."""
    home = tmp_path / "home"
    home.mkdir()
    db = sqlite3.connect(home / "ledger.db", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES (1)")
    files = list_files(tmp_path, home=home)
    manifest(tmp_path, files)  # hashes every file: what a push reads
    write_archive(tmp_path, files, tmp_path.parent / "push.tar.gz")
    # another process reads and closes the ledger (a CLI's `spotrun ls`)
    reader = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT * FROM t'); c.close()"
    subprocess.run([sys.executable, "-c", reader, str(home / "ledger.db")], check=True)
    assert (home / "ledger.db-wal").exists()
    db.execute("INSERT INTO t VALUES (2)")
    db.close()
    again = sqlite3.connect(home / "ledger.db")
    assert again.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 2
    again.close()
