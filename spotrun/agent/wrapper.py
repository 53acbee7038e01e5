"""The job wrapper: the process a run's tmux session runs.

It runs the job's setup once per instance (when the job has one), then puts the job's data
set in place (when it names one: staged from S3 or mounted from a snapshot by `spotrun agent
stage`, its path given to the job as SPOTRUN_DATA_DIR), then the job, copies their
output both to the terminal (what `attach` shows) and to job.log, passes signals on, and writes
exit.json when the job ends, so the outcome is known even when no controller was watching.

Signals reach the job's own process: the wrapper's child runs in a process group of its own,
and a signal the wrapper gets (or that `signal_job` sends) goes to that child; when the child
is still the shell spotrun started for a shell command (bash did not exec the last command),
the programs the shell is running get it too. Their own children (data loader workers, torchrun's
ranks) are left to their parents: a SIGTERM straight to a DataLoader's workers would kill them
before the script could save, and torchrun passes the signal to its ranks itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import BinaryIO

from spotrun.core.rundir import (
    CHECKPOINTS_DIR,
    DATA_DIR_VAR,
    DATA_PATH_FILE,
    EXIT_FILE,
    JOB_FILE,
    JOB_LOG_FILE,
    SETUP_LOG_FILE,
)
from spotrun.core.waiting import poll_until

# After an ending signal, how long the wrapper waits for the signalled programs to finish
# (e.g. a script still saving after its shell has gone) before it records the exit.
DRAIN_S = 60.0

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP)
_ENDING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def write_json_atomic(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@dataclass(frozen=True)
class Setup:
    """A bash script run once per instance before the job; `marker` records it succeeded."""

    script: Path
    marker: Path

    def digest(self) -> str:
        return hashlib.sha256(self.script.read_bytes()).hexdigest()

    def done(self) -> bool:
        try:
            return self.marker.read_text().strip() == self.digest()
        except OSError:
            return False

    def mark_done(self) -> None:
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        self.marker.write_text(self.digest() + "\n")


# ------------------------------------------------------------------ signals
def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.decode(errors="replace").split("\0")[:-1]


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux /proc; none elsewhere)."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(name))
    return found


def deliver(pid: int, argv: list[str], signum: int) -> list[int]:
    """Send `signum` to the job's process `pid` (started as `argv`); returns who got it.

    A shell spotrun started (argv[0] is bash and the process still runs it: bash has not exec'd
    the command) passes no signal on while it waits, so the programs it runs get it as well.
    """
    targets = []
    if argv and os.path.basename(argv[0]) == "bash" and _cmdline(pid) == argv:
        targets = _children(pid)
    # The shell first: signalled after its program, it could see that program end (having
    # saved), run its next command and exit 0 before its own signal came, a stop reading
    # as success. Its children are found before it goes, and still get the signal.
    for target in [pid, *targets]:
        try:
            os.kill(target, signum)
        except ProcessLookupError:
            continue
    return [pid, *targets]


def signal_job(run_dir: Path, signum: int) -> bool:
    """Signal the run's job as its wrapper does (stop, a spot notice); True if someone got it.

    The wrapper is asked first, so that it knows to wait for the job to finish saving; a job
    whose wrapper is gone is signalled directly.
    """
    try:
        job = json.loads((run_dir / JOB_FILE).read_text())
    except (OSError, ValueError):
        return False
    for key in ("wrapper_pid", "child_pid"):
        pid = job.get(key)
        if not isinstance(pid, int):
            continue
        try:
            if key == "wrapper_pid":
                os.kill(pid, signum)
            else:
                deliver(pid, [str(a) for a in job.get("child_argv") or []], signum)
            return True
        except ProcessLookupError:
            continue
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ------------------------------------------------------------------ the wrapper
class _Wrapper:
    def __init__(
        self, run_dir: Path, argv: list[str], cwd: Path | None, checkpoint_dir: Path | None
    ) -> None:
        self.run_dir = run_dir
        self.argv = argv
        self.cwd = cwd
        self.checkpoint_dir = checkpoint_dir
        self.started = time.time()
        self.child: subprocess.Popen[bytes] | None = None
        self.child_argv: list[str] = []
        self.signalled: set[int] = set()
        self.ending_signal: int | None = None  # the first SIGTERM/SIGINT/SIGHUP received

    def record(self, phase: str) -> None:
        child = self.child
        write_json_atomic(
            self.run_dir / JOB_FILE,
            {
                "wrapper_pid": os.getpid(),
                "child_pid": child.pid if child else None,
                "child_argv": self.child_argv,
                "phase": phase,
                "started_at": self.started,
                "argv": self.argv,
                "cwd": str(self.cwd) if self.cwd else None,
                "checkpoint_dir": str(self.checkpoint_dir) if self.checkpoint_dir else None,
            },
        )

    def forward(self, signum: int, _frame: FrameType | None) -> None:
        if signum in _ENDING and self.ending_signal is None:
            self.ending_signal = signum
        child = self.child
        if child is None or child.poll() is not None:
            return
        self.signalled.update(deliver(child.pid, self.child_argv, signum))

    def run_phase(
        self,
        phase: str,
        argv: list[str],
        logs: list[BinaryIO],
        env: dict[str, str] | None = None,
    ) -> int:
        try:
            child = subprocess.Popen(
                argv,
                env={**os.environ, **env} if env else None,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                start_new_session=True,  # its own group: signals reach it only through us
            )
        except OSError as exc:
            _emit(logs, f"spotrun: cannot start {argv[0]}: {exc.strerror or exc}\n".encode())
            return 127
        self.child, self.child_argv = child, argv
        self.record(phase)
        assert child.stdout is not None
        out_fd = child.stdout.fileno()
        while True:
            try:
                chunk = os.read(out_fd, 65536)
            except InterruptedError:
                continue
            if not chunk:
                break
            _emit(logs, chunk)
        code = child.wait()
        if self.ending_signal is not None:
            self._drain(child.pid)
        return 128 - code if code < 0 else code  # killed by a signal: as a shell reports it

    def _drain(self, reaped: int) -> None:
        others = [p for p in self.signalled if p != reaped]
        poll_until(lambda: not any(_alive(p) for p in others), timeout_s=DRAIN_S, interval_s=0.05)

    def write_exit(self, code: int, phase: str) -> None:
        write_json_atomic(
            self.run_dir / EXIT_FILE,
            {
                "exit_code": code,
                "phase": phase,
                "started_at": self.started,
                "ended_at": time.time(),
            },
        )


def private_folder(folder: Path) -> None:
    """`folder` made, or tightened to, 0700 (one of another user's is left as it is)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = folder.stat()
    if found.st_uid == os.getuid() and found.st_mode & 0o077:
        os.chmod(folder, 0o700)


def link_checkpoints(path: Path, store: Path) -> str | None:
    """Make the job's checkpoint folder `path` the run's `store` (a link when they differ).

    The store is inside the run folder, so what the job saves there is synced back, uploaded to
    the durable store, and put back on a replacement instance before the job starts again.
    Returns a problem to report, or None.
    """
    private_folder(store)
    if path.absolute() == store.absolute():
        return None
    if path.is_symlink():
        if path.resolve() == store.resolve():
            return None
        path.unlink()
    elif path.is_dir():  # shipped with the workdir: its files join the store
        for item in path.iterdir():
            if not (store / item.name).exists():
                os.replace(item, store / item.name)
        shutil.rmtree(path)
    elif path.exists():
        return f"checkpoint_dir {path} is a file, not a folder"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(store, target_is_directory=True)
    return None


def _emit(logs: list[BinaryIO], chunk: bytes) -> None:
    for log in logs:
        log.write(chunk)
    try:
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
    except OSError:
        pass  # the terminal went away (session being killed); job.log still has it all


def run_wrapped(
    run_dir: Path,
    argv: list[str],
    *,
    cwd: Path | None = None,
    setup: Setup | None = None,
    checkpoint_dir: Path | None = None,
    data: str | None = None,
) -> int:
    # The job's files (job.log, metrics, checkpoints) are its user's alone, as is the folder
    # that holds them (made earlier by a push or a restore, with another umask).
    os.umask(0o077)
    private_folder(run_dir)
    (run_dir / EXIT_FILE).unlink(missing_ok=True)
    wrapper = _Wrapper(run_dir, argv, cwd, checkpoint_dir)
    for sig in _FORWARDED:
        signal.signal(sig, wrapper.forward)
    log = open(run_dir / JOB_LOG_FILE, "ab", buffering=0)
    try:
        if checkpoint_dir is not None:
            problem = link_checkpoints(checkpoint_dir, run_dir / CHECKPOINTS_DIR)
            if problem:
                _emit([log], f"spotrun: {problem}\n".encode())
                wrapper.write_exit(2, "setup")
                return 2
        if setup is not None and not setup.done():
            with open(run_dir / SETUP_LOG_FILE, "ab", buffering=0) as setup_log:
                _emit([log], b"spotrun: setup (once per instance)\n")
                began = time.monotonic()
                code = wrapper.run_phase("setup", ["bash", str(setup.script)], [log, setup_log])
            if code == 0 and wrapper.ending_signal is not None:
                code = 128 + wrapper.ending_signal  # stopped: the job must not start now
            if code != 0:
                _emit([log], f"spotrun: setup failed with exit code {code}\n".encode())
                wrapper.write_exit(code, "setup")
                return code
            setup.mark_done()
            _emit([log], f"spotrun: setup done in {time.monotonic() - began:.1f} s\n".encode())
        env: dict[str, str] = {}
        if data is not None:
            found = _data_phase(wrapper, data, log)
            if isinstance(found, int):
                wrapper.write_exit(found, "data")
                return found
            env[DATA_DIR_VAR] = found
        code = wrapper.run_phase("run", argv, [log], env)
        wrapper.write_exit(code, "run")
        return code
    finally:
        log.close()


def _data_phase(wrapper: _Wrapper, data: str, log: BinaryIO) -> str | int:
    """The job's data set in place: its local path, or the exit code of a failed staging.

    Remote data is staged (or mounted) by a child process, so a stop signal reaches it like
    the job's, and what it says lands in job.log; a path here is used as it is."""
    if not data.startswith(("s3://", "snapshot:")):
        return data
    path_file = wrapper.run_dir / DATA_PATH_FILE
    path_file.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "spotrun", "agent", "stage", "--run-dir"]
    argv += [str(wrapper.run_dir), "--data", data, "--path-file", str(path_file)]
    code = wrapper.run_phase("data", argv, [log])
    if code == 0 and wrapper.ending_signal is not None:
        code = 128 + wrapper.ending_signal  # stopped while staging: the job must not start
    if code == 0:
        try:
            return path_file.read_text().strip()
        except OSError:
            code = 1
    _emit([log], f"spotrun: staging the data set {data} failed (exit code {code})\n".encode())
    return code


def read_env_file(path: Path) -> dict[str, str]:
    """The job's environment (JOB_ENV_FILE): a JSON object of strings."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ValueError(f"{path} is not a JSON object of strings")
    return data
