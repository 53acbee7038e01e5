"""`spotrun exec`: another command in a new window of a live run's tmux session.

The window runs the command with bash in the job's folder and the run's variables (read from its
0600 env file), copies its output to `exec/<window>.log` in the run folder and records its
exit code in `exec/<window>.exit`, so the caller can follow it and report how it ended.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from spotrun.agent.session import new_window, session_exists
from spotrun.core.rundir import EXEC_DIR, EXEC_WINDOW_PREFIX, JOB_ENV_FILE, JOB_FILE


def _job_cwd(run_dir: Path) -> str:
    try:
        cwd = json.loads((run_dir / JOB_FILE).read_text()).get("cwd")
    except (OSError, ValueError):
        cwd = None
    return cwd if isinstance(cwd, str) and Path(cwd).is_dir() else str(run_dir)


def start_exec(session: str, run_dir: Path, command: str) -> dict[str, object]:
    if not session_exists(session):
        return {"error": f"tmux session {session} is not running"}
    folder = run_dir / EXEC_DIR
    folder.mkdir(parents=True, exist_ok=True)
    number = 1 + sum(1 for p in folder.glob(f"{EXEC_WINDOW_PREFIX}*.log"))
    window = f"{EXEC_WINDOW_PREFIX}{number}"
    log, done = folder / f"{window}.log", folder / f"{window}.exit"
    log.touch()
    q = shlex.quote
    script = (
        f"{{ {command}\n}} 2>&1 | tee -a {q(str(log))}; code=${{PIPESTATUS[0]}}; "
        f"echo $code > {q(str(done))}.tmp && mv {q(str(done))}.tmp {q(str(done))}"
    )
    argv = ["bash", "-c", script]
    if (run_dir / JOB_ENV_FILE).exists():  # the run's variables, read from its 0600 file
        agent = [sys.executable, "-m", "spotrun", "agent", "with-env"]
        argv = [*agent, "--env-file", str(run_dir / JOB_ENV_FILE), "--", *argv]
    new_window(session, window, shlex.join(argv), _job_cwd(run_dir))
    return {"window": window, "log": str(log)}


def exec_status(run_dir: Path, window: str) -> dict[str, object]:
    folder = run_dir / EXEC_DIR
    try:
        output = (folder / f"{window}.log").read_text(errors="replace")
    except OSError:
        return {"error": f"no exec window {window} in this run"}
    try:
        code: int | None = int((folder / f"{window}.exit").read_text().strip())
    except (OSError, ValueError):
        code = None
    return {"window": window, "exit_code": code, "output": output}
