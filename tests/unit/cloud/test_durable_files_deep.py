"""The instance's checkpoint pusher lists the run folder's durable files past a folder the job
made too deep to open: that folder is passed over, every other push goes on."""

from __future__ import annotations

import os
from pathlib import Path

from spotrun.cloud.aws.checkpoints import _durable_files
from spotrun.core.rundir import CHECKPOINTS_DIR, METRICS_FILE


def _deep(root: Path, levels: int) -> None:
    """Folders of 200-byte names, made one level at a time (the whole path outgrows PATH_MAX)."""
    here = os.open(root, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("d" * 200, dir_fd=here)
            inner = os.open("d" * 200, os.O_RDONLY, dir_fd=here)
            os.close(here)
            here = inner
        fd = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=here)
        os.close(fd)
    finally:
        os.close(here)


def test_a_folder_too_deep_to_open_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / CHECKPOINTS_DIR).mkdir()
    (tmp_path / CHECKPOINTS_DIR / "last.pt").write_bytes(b"w")
    (tmp_path / METRICS_FILE).write_text("{}\n")
    _deep(tmp_path, 25)
    listed = [rel for rel, _path in _durable_files(tmp_path)]
    assert f"{CHECKPOINTS_DIR}/last.pt" in listed and METRICS_FILE in listed, listed
