"""The controller's poll never reads through a link (issue 38, point 4): a growing file swapped
for a link to a file outside the run folder brings none of that file's bytes, and a run folder
that is itself a link is no run folder. Real shells, bash and dash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spotrun.remote.probe import Probe, Tail, run_probe
from tests.unit.remote.test_probe import ShellRunner

SECRET = b"0123456789 a line from outside the run folder\n"


@pytest.fixture(params=["bash", "sh"])
def shell(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_growing_file_swapped_for_a_link_brings_no_bytes(tmp_path: Path, shell: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(SECRET)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "job.log").symlink_to(outside)
    (run_dir / "sub").symlink_to(tmp_path)  # a folder on the path: outside.txt under it
    (run_dir / "ok.log").write_bytes(b"line 1\nline 2\n")
    tails = (Tail("job.log", 7), Tail("sub/outside.txt", 7), Tail("ok.log", 7))
    answer = run_probe(ShellRunner(shell), Probe(str(run_dir), tails=tails))
    assert answer.tails == {"ok.log": b"line 2\n"}
    assert answer.files is not None and [f.path for f in answer.files] == ["ok.log"]


def test_a_run_folder_that_is_a_link_is_no_run_folder(tmp_path: Path, shell: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "outside.log").write_bytes(SECRET)
    run_dir = tmp_path / "run"
    os.symlink(elsewhere, run_dir)
    answer = run_probe(ShellRunner(shell), Probe(str(run_dir), tails=(Tail("outside.log", 3),)))
    assert answer.files is None and answer.tails == {}
