"""A ledger that cannot be written now (a read-only file, a full disk) raises LedgerWriteError,
one line, and is written again as soon as it can be: a connection opened while the file was
read-only would never write again, so the ledger opens a new one (issue 38, point 2). A run
folder that the ledger forgot is adopted back (point 8). Real files: chattr +i, a small tmpfs."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotrun.core.config import LaunchSpec
from spotrun.core.errors import LedgerWriteError
from spotrun.core.runstates import RunState
from spotrun.store.adopt import adopt_run_folders
from spotrun.store.ledger import Ledger
from spotrun.store.runs_admin import forget_run
from tests.immutable_files import ImmutableFiles


def test_a_ledger_opened_read_only_writes_once_writable_again(
    tmp_path: Path, immutable: ImmutableFiles
) -> None:
    home = tmp_path / "home"
    with Ledger(home=home) as first:
        run = first.create_run(LaunchSpec(recipe="digits-fast"))
    db_file = home / "ledger.db"
    immutable.lock(db_file)
    ledger = Ledger(home=home)  # opens (reading works) while the file is immutable
    with pytest.raises(LedgerWriteError, match="cannot write the ledger .* readonly") as caught:
        ledger.set_message(run.id, "while read-only")
    assert "\n" not in caught.value.user_message()
    assert ledger.get_run(run.id).message is None  # still read
    immutable.unlock(db_file)
    ledger.set_message(run.id, "writable again")  # the same Ledger, no restart
    assert ledger.get_run(run.id).message == "writable again"
    ledger.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_a_full_disk_is_a_write_error_and_writes_go_on_once_there_is_room(
    small_disk: Path,
) -> None:
    ledger = Ledger(home=small_disk / "home")
    run = ledger.create_run(LaunchSpec(recipe="digits-fast"))
    filler = _fill(small_disk)
    with pytest.raises(LedgerWriteError, match="disk is full"):
        for n in range(10_000):  # until the WAL needs a page the disk does not have
            ledger.add_event(run.id, "test", f"event {n} " + "x" * 2000)
    filler.unlink()
    ledger.set_message(run.id, "room again")
    assert ledger.get_run(run.id).message == "room again"
    ledger.close()


def _folder(home: Path, run_id: str, job: dict[str, object], exit_code: int | None) -> Path:
    run_dir = home / "runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "job.json").write_text(json.dumps(job))
    if exit_code is not None:
        (run_dir / "exit.json").write_text(json.dumps({"exit_code": exit_code}))
    return run_dir


def test_run_folders_the_ledger_lost_are_adopted_back(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ledger = Ledger(home=home)
    known = ledger.create_run(LaunchSpec(recipe="digits-fast"))
    live = _folder(home, "0123456789ab", {"argv": ["sleep", "9"], "cwd": "/root/x"}, None)
    here = str(home / "runs" / "ba9876543210" / "workdir")
    _folder(home, "ba9876543210", {"argv": ["true"], "cwd": here}, 0)
    _folder(home, "aaaaaaaaaaaa", {"argv": ["false"]}, 3)
    (home / "runs" / "bbbbbbbbbbbb").mkdir()  # no job record: it never ran
    (home / "runs" / "not-a-run").mkdir()

    adopted = {a.run_id: a.state for a in adopt_run_folders(ledger)}
    assert adopted == {
        "0123456789ab": RunState.RUNNING,
        "ba9876543210": RunState.SUCCEEDED,
        "aaaaaaaaaaaa": RunState.FAILED,
    }
    run = ledger.get_run("0123456789ab")
    assert run.run_dir == live and run.cloud == "aws"  # its job ran on an instance
    assert run.spec.job is not None and run.spec.job.argv == ["sleep", "9"]
    assert ledger.get_run("ba9876543210").cloud == "local"  # ran in this very folder
    assert "exited with code 3" in (ledger.get_run("aaaaaaaaaaaa").message or "")
    assert any("adopted back" in e.message for e in ledger.events("0123456789ab"))
    assert known.id not in adopted
    assert adopt_run_folders(ledger) == []  # once


def test_a_forgotten_run_whose_folder_is_not_gone_yet_is_not_adopted(tmp_path: Path) -> None:
    ledger = Ledger(home=tmp_path / "home")
    run = ledger.create_run(LaunchSpec(recipe="digits-fast"))
    (run.run_dir / "job.json").write_text(json.dumps({"argv": ["true"]}))
    (run.run_dir / "exit.json").write_text(json.dumps({"exit_code": 0}))
    ledger.transition(run.id, RunState.FAILED, "test")
    forget_run(ledger, run.id)  # `spotrun rm` removes the folder after this
    assert adopt_run_folders(ledger) == []
    assert os.path.isdir(run.run_dir)
