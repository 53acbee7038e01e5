"""The job wrapper: the process a run's tmux session runs.

It starts the job, copies its output both to the terminal (what `attach` shows) and to
job.log, passes stop signals on, and writes exit.json when the job ends, so the outcome is
known even when no controller was watching.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

JOB_FILE = "job.json"
EXIT_FILE = "exit.json"
LOG_FILE = "job.log"

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP)


def write_json_atomic(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def run_wrapped(run_dir: Path, argv: list[str]) -> int:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / EXIT_FILE).unlink(missing_ok=True)
    started = time.time()
    log = open(run_dir / LOG_FILE, "ab", buffering=0)
    try:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as exc:
        message = f"spotrun: cannot start {argv[0]}: {exc.strerror or exc}\n".encode()
        log.write(message)
        sys.stdout.buffer.write(message)
        write_json_atomic(
            run_dir / EXIT_FILE, {"exit_code": 127, "started_at": started, "ended_at": time.time()}
        )
        return 127
    write_json_atomic(
        run_dir / JOB_FILE,
        {"wrapper_pid": os.getpid(), "child_pid": child.pid, "started_at": started, "argv": argv},
    )

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    for sig in _FORWARDED:
        signal.signal(sig, forward)

    assert child.stdout is not None
    out_fd = child.stdout.fileno()
    while True:
        try:
            chunk = os.read(out_fd, 65536)
        except InterruptedError:
            continue
        if not chunk:
            break
        log.write(chunk)
        try:
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
        except OSError:
            pass  # the terminal went away (session being killed); job.log still has it all
    code = child.wait()
    if code < 0:  # killed by a signal: report it the way a shell does
        code = 128 - code
    write_json_atomic(
        run_dir / EXIT_FILE, {"exit_code": code, "started_at": started, "ended_at": time.time()}
    )
    log.close()
    return code
