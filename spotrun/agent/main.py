"""`spotrun agent ...`: job control on the machine the job runs on, answering in JSON.

The controller calls these through a Runner (a local shell, or SSH), so the local cloud and
AWS instances are driven by the same code.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

from spotrun.agent.session import kill_session, session_exists, start_session
from spotrun.agent.wrapper import EXIT_FILE, JOB_FILE, run_wrapped


def _read_json(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def job_status(session: str, run_dir: Path) -> dict[str, object]:
    exit_info = _read_json(run_dir / EXIT_FILE)
    return {
        "alive": session_exists(session),
        "exit_code": exit_info.get("exit_code") if exit_info else None,
        "ended_at": exit_info.get("ended_at") if exit_info else None,
        "job": _read_json(run_dir / JOB_FILE),
    }


def start_job(
    session: str, run_dir: Path, argv: list[str], env: dict[str, str]
) -> dict[str, object]:
    if session_exists(session):
        return {"session": session, "started": False}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / EXIT_FILE).unlink(missing_ok=True)
    wrapper = [sys.executable, "-m", "spotrun", "agent", "wrap", "--run-dir", str(run_dir), "--"]
    start_session(session, shlex.join(wrapper + argv), str(run_dir), env)
    return {"session": session, "started": True}


def stop_job(session: str, run_dir: Path, grace_s: float) -> dict[str, object]:
    """SIGTERM the job (the trainer checkpoints and exits), then end the session."""
    job = _read_json(run_dir / JOB_FILE) or {}
    child = job.get("child_pid")
    signalled = False
    if (
        isinstance(child, int)
        and session_exists(session)
        and (run_dir / EXIT_FILE).exists() is False
    ):
        try:
            os.kill(child, signal.SIGTERM)
            signalled = True
        except ProcessLookupError:
            signalled = False
    deadline = time.monotonic() + grace_s
    while signalled and time.monotonic() < deadline and not (run_dir / EXIT_FILE).exists():
        time.sleep(0.1)
    killed = kill_session(session)
    status = job_status(session, run_dir)
    status.update({"signalled": signalled, "killed_session": killed})
    return status


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="spotrun agent")
    sub = parser.add_subparsers(dest="op", required=True)
    for op in ("start", "status", "stop"):
        p = sub.add_parser(op)
        p.add_argument("--session", required=True)
        p.add_argument("--run-dir", required=True, type=Path)
        if op == "start":
            p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
            p.add_argument("argv", nargs=argparse.REMAINDER)
        if op == "stop":
            p.add_argument("--grace", type=float, default=15.0)
    wrap = sub.add_parser("wrap")
    wrap.add_argument("--run-dir", required=True, type=Path)
    wrap.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    if args.op == "wrap":
        return run_wrapped(args.run_dir, _strip_dashes(args.argv))
    if args.op == "start":
        env = dict(item.split("=", 1) for item in args.env)
        result = start_job(args.session, args.run_dir, _strip_dashes(args.argv), env)
    elif args.op == "status":
        result = job_status(args.session, args.run_dir)
    else:
        result = stop_job(args.session, args.run_dir, args.grace)
    print(json.dumps(result))
    return 0


def _strip_dashes(argv: list[str]) -> list[str]:
    return argv[1:] if argv[:1] == ["--"] else argv
