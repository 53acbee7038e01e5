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
from pathlib import Path
from typing import TYPE_CHECKING

from spotrun.agent.exec_window import exec_status, start_exec
from spotrun.agent.gpus import visible_gpus
from spotrun.agent.session import kill_session, session_exists, start_session
from spotrun.agent.wrapper import Setup, private_folder, read_env_file, run_wrapped, signal_job
from spotrun.core.errors import SpotrunError
from spotrun.core.lazy import lazy_module
from spotrun.core.rundir import DATA_DIR_VAR, EXIT_FILE, JOB_FILE, SETUP_DONE_FILE
from spotrun.core.waiting import poll_until

if TYPE_CHECKING:
    from spotrun.core import config
    from spotrun.datasets import prepare as data_prepare
else:
    # the controller polls `agent status` every second or two; pydantic's settings and
    # staging's modules load for `agent stage` only (measured: ~0.1 s of a ~0.3 s start)
    config = lazy_module("spotrun.core.config")
    data_prepare = lazy_module("spotrun.datasets.prepare")


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
    session: str,
    run_dir: Path,
    argv: list[str],
    options: list[str] | None = None,
    cwd: str | None = None,
) -> dict[str, object]:
    """Start the wrapper (with its `options`: --cwd, --setup, --checkpoint-dir, --env-file) in
    tmux. The job's environment is in the env file, never on tmux's command line."""
    if session_exists(session):
        return {"session": session, "started": False}
    private_folder(run_dir)
    if cwd is not None:
        Path(cwd).mkdir(parents=True, exist_ok=True)
    (run_dir / EXIT_FILE).unlink(missing_ok=True)
    wrapper = [sys.executable, "-m", "spotrun", "agent", "wrap", "--run-dir", str(run_dir)]
    command = shlex.join([*wrapper, *(options or []), "--", *argv])
    start_session(session, command, cwd or str(run_dir))
    return {"session": session, "started": True}


def stop_job(session: str, run_dir: Path, grace_s: float) -> dict[str, object]:
    """SIGTERM the job through its wrapper (the trainer checkpoints and exits), then end the
    session."""
    signalled = False
    if session_exists(session) and not (run_dir / EXIT_FILE).exists():
        signalled = signal_job(run_dir, signal.SIGTERM)
    if signalled:
        poll_until((run_dir / EXIT_FILE).exists, timeout_s=grace_s, interval_s=0.1)
    killed = kill_session(session)
    status = job_status(session, run_dir)
    status.update({"signalled": signalled, "killed_session": killed})
    return status


def stage_data(run_dir: Path, data: str, path_file: Path) -> int:
    """A task's data set in place on this machine (staged from S3, or its snapshot volume
    mounted): its folder written to `path_file`; a clear message and the error's code if not."""
    try:
        where = data_prepare.local_data(data, config.load_settings().home, run_dir)
    except SpotrunError as exc:
        print(f"spotrun: {exc.user_message()}", flush=True)
        return exc.exit_code
    path_file.write_text(where + "\n")
    print(f"spotrun: data set {data} is in {where} ({DATA_DIR_VAR})", flush=True)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="spotrun agent")
    sub = parser.add_subparsers(dest="op", required=True)
    for op in ("start", "stop", "exec", "exec-status"):
        p = sub.add_parser(op)
        p.add_argument("--session", required=True)
        p.add_argument("--run-dir", required=True, type=Path)
        if op == "start":
            p.add_argument("--env-file", type=Path, default=None, help="the job's env (0600)")
            p.add_argument("--wrap", action="append", default=[], metavar="OPTION")
            p.add_argument("argv", nargs=argparse.REMAINDER)
        if op == "stop":
            p.add_argument("--grace", type=float, default=15.0)
        if op == "exec":
            p.add_argument("--command", required=True)
        if op == "exec-status":
            p.add_argument("--window", required=True)
    with_env = sub.add_parser("with-env", help="run a command with the job's environment")
    with_env.add_argument("--env-file", required=True, type=Path)
    with_env.add_argument("argv", nargs=argparse.REMAINDER)
    wrap = sub.add_parser("wrap")
    wrap.add_argument("--run-dir", required=True, type=Path)
    wrap.add_argument("--cwd", type=Path, default=None)
    wrap.add_argument("--setup", type=Path, default=None, help="a bash script run once first")
    wrap.add_argument("--checkpoint-dir", type=Path, default=None)
    wrap.add_argument("--data", default=None, help=f"the job's data set ({DATA_DIR_VAR})")
    wrap.add_argument("--env-file", type=Path, default=None, help="the job's env (JSON, 0600)")
    wrap.add_argument("argv", nargs=argparse.REMAINDER)
    sub.add_parser("gpus", help="the GPUs torch sees and nvidia-smi lists, as JSON")
    stage = sub.add_parser("stage", help="put a data set in place; its path to --path-file")
    stage.add_argument("--run-dir", required=True, type=Path)
    stage.add_argument("--data", required=True)
    stage.add_argument("--path-file", required=True, type=Path)
    args = parser.parse_args(argv)

    if args.op == "with-env":  # an exec window: the run's variables, from the file
        argv = _strip_dashes(args.argv)
        os.execvpe(argv[0], argv, {**os.environ, **read_env_file(args.env_file)})
    if args.op == "wrap":
        if args.env_file is not None:  # every phase (setup, data, run) sees it
            os.environ.update(read_env_file(args.env_file))
        setup = None
        if args.setup is not None:
            setup = Setup(args.setup, args.run_dir / SETUP_DONE_FILE)
        return run_wrapped(
            args.run_dir,
            _strip_dashes(args.argv),
            cwd=args.cwd,
            setup=setup,
            checkpoint_dir=args.checkpoint_dir,
            data=args.data,
        )
    if args.op == "stage":
        return stage_data(args.run_dir, args.data, args.path_file)
    if args.op == "gpus":
        print(json.dumps(visible_gpus()))
        return 0
    if args.op == "start":
        cwd = next((o.split("=", 1)[1] for o in args.wrap if o.startswith("--cwd=")), None)
        wrap = args.wrap + ([f"--env-file={args.env_file}"] if args.env_file else [])
        result = start_job(args.session, args.run_dir, _strip_dashes(args.argv), wrap, cwd)
    elif args.op == "exec":
        result = start_exec(args.session, args.run_dir, args.command)
    elif args.op == "exec-status":
        result = exec_status(args.run_dir, args.window)
    else:
        result = stop_job(args.session, args.run_dir, args.grace)
    print(json.dumps(result))
    return 0


def _strip_dashes(argv: list[str]) -> list[str]:
    return argv[1:] if argv[:1] == ["--"] else argv
