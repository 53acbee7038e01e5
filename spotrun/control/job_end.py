"""How a run's job ended, read from its run folder: the wrapper's exit record (its code, and
the phase that ended it: setup or run) and the last lines of the job's log for the message."""

from __future__ import annotations

import json
import time
from pathlib import Path

from spotrun.core.checkpoint_files import newest_complete_checkpoint
from spotrun.core.rundir import EXIT_FILE, JOB_LOG_FILE
from spotrun.core.terminal_text import printable
from spotrun.remote.jobprep import setup_failure
from spotrun.store.ledger import RunRecord


def _exit_record(run_dir: Path) -> dict[str, object]:
    try:
        data = json.loads((run_dir / EXIT_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def exit_code(run_dir: Path) -> int | None:
    code = _exit_record(run_dir).get("exit_code")
    return code if isinstance(code, int) else None


def exit_phase(run_dir: Path) -> str | None:
    """Which part of the job ended it: "setup" or "run" (the wrapper records it)."""
    phase = _exit_record(run_dir).get("phase")
    return phase if isinstance(phase, str) else None


def write_exit(run_dir: Path, code: int) -> None:
    """An exit record for a job that ended without writing one (its session was killed)."""
    (run_dir / EXIT_FILE).write_text(json.dumps({"exit_code": code, "ended_at": time.time()}))


# How a job ended by SIGINT reads: 128 + 2 as a shell reports it, -2 as Python's returncode
SIGINT_CODES = frozenset({130, -2})


def interrupted_from_terminal(run: RunRecord, code: int | None) -> str | None:
    """The message of a job ended by Ctrl-C (SIGINT, most often typed in an attached
    terminal): a stop the user made, with how to go on; None for any other end."""
    if code not in SIGINT_CODES:
        return None
    said = "interrupted from the terminal (Ctrl-C)"
    found = newest_complete_checkpoint(run.run_dir)
    if run.sweep_id is not None:  # a trial goes on only as its sweep decides
        return f"{said} at step {found[1]}" if found is not None else said
    resume = f"`spotrun resume {run.name}`"
    if found is None:
        return f"{said}; {resume} starts it again (no checkpoint yet)"
    return f"{said}; {resume} goes on from step {found[1]}"


def failure_message(run_dir: Path, code: int | None) -> str:
    """A failed run's message: the code, and the last lines of setup's or the job's log."""
    if code is not None and exit_phase(run_dir) == "setup":
        return setup_failure(run_dir, code)
    tail = log_tail(run_dir / JOB_LOG_FILE, 3)
    what = f"job exited with code {code}" if code is not None else "job ended without an exit code"
    return f"{what}: {tail}" if tail else what


def log_tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [printable(line).strip() for line in text.splitlines() if printable(line).strip()]
    return " | ".join(kept[-lines:])
