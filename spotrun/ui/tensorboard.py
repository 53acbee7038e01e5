"""TensorBoard by run name: SPOTRUN_HOME/tensorboard/<run name> links to the run's folder,
where the trainer writes its event files (spotrun.train.curves), so that

    tensorboard --logdir SPOTRUN_HOME/tensorboard

lists runs by name rather than by id. `spotrun ui` refreshes the links, and starts TensorBoard
(bound to 127.0.0.1) the first time a page asks for a run's TensorBoard view.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import quote

from spotrun.core.errors import StateError
from spotrun.core.waiting import WaitTimeout, wait_until
from spotrun.store.ledger import RunRecord

LINKS_FOLDER = "tensorboard"  # in SPOTRUN_HOME: one link per run, named as the run
START_TIMEOUT_S = 60.0


def installed() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def refresh_links(home: Path, runs: list[RunRecord]) -> Path:
    """One link per run, named by the run's name, to its folder; links of forgotten runs go."""
    folder = home / LINKS_FOLDER
    folder.mkdir(exist_ok=True)
    wanted = {run.name: run.run_dir for run in runs if "/" not in run.name}
    for entry in folder.iterdir():
        if entry.is_symlink() and entry.name not in wanted:
            entry.unlink()
    for name, target in wanted.items():
        link = folder / name
        if link.is_symlink() and Path(os.readlink(link)) == target:
            continue
        if link.is_symlink():
            link.unlink()
        elif link.exists():
            continue  # the user's own file or folder: left alone
        link.symlink_to(target, target_is_directory=True)
    return folder


class TensorBoard:
    """One TensorBoard child process over the links folder, started on first use."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._lock = threading.Lock()

    def url_for(self, run_name: str) -> str:
        port = self._ensure_started()
        # TensorBoard's time-series view, filtered to this run's name
        return f"http://127.0.0.1:{port}/?runFilter={quote(run_name)}#timeseries"

    def _ensure_started(self) -> int:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None and self._port is not None:
                return self._port
            port = _free_port()
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tensorboard.main", "--logdir", str(self.logdir)]
                + ["--host", "127.0.0.1", "--port", str(port), "--reload_interval", "5"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_until(
                    lambda: _answers(port) or self._exited(),
                    timeout_s=START_TIMEOUT_S,
                    what="TensorBoard to answer",
                )
            except WaitTimeout:
                self.close()
                raise StateError("TensorBoard did not start", hint="run it yourself") from None
            if self._exited():
                self._proc = None
                raise StateError("TensorBoard exited at start", hint="run it yourself")
            self._port = port
            return port

    def _exited(self) -> bool:
        return self._proc is not None and self._proc.poll() is not None

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._proc = None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
