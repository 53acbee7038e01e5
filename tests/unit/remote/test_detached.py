"""start_once on this machine's shell: one process however often it is asked, another once
that one has ended."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from spotrun.remote.detached import start_once
from spotrun.remote.local import LocalRunner
from tests.helpers import wait_for


def _alive(pid: int) -> bool:
    # A zombie counts: `kill -0`, which start_once asks, still finds it until it is reaped.
    return Path(f"/proc/{pid}").exists()


def test_started_once_while_it_runs_and_again_after_it_ended(tmp_path: Path) -> None:
    folder = tmp_path / "made" / "here"
    runner = LocalRunner()

    def start() -> None:
        start_once(
            runner,
            str(folder),
            "sh -c 'echo started; exec sleep 600'",
            pid_file="helper.pid",
            log_file="helper.log",
            what="starting the helper",
        )

    start()
    first = int((folder / "helper.pid").read_text())
    wait_for(lambda: "started" in (folder / "helper.log").read_text(), 30, "its first line")
    start()  # still running: nothing new
    assert int((folder / "helper.pid").read_text()) == first
    assert (folder / "helper.log").read_text() == "started\n"
    os.kill(first, signal.SIGTERM)
    wait_for(lambda: not _alive(first), 30, "the helper to end")
    start()
    second = int((folder / "helper.pid").read_text())
    try:
        assert second != first and _alive(second)
        wait_for(lambda: (folder / "helper.log").read_text() == "started\n" * 2, 30, "2 lines")
    finally:
        os.kill(second, signal.SIGTERM)
