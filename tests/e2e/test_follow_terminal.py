"""The foreground view in a real terminal (a tmux pane) and piped: a live progress line
(epoch k/N, step in the epoch, images/s, ETA, accuracy, cost) on a terminal, plain lines when
piped; the line goes away when the run ends."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import threading

import pytest

from tests.conftest import REPO, Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

PROGRESS = re.compile(r"epoch \d+/400  step \d+/22  [\d,]+ img/s  ETA \S+  .*\$0\.00 so far")


def _pane(env: Env) -> str:
    return env.tmux("-L", "view", "capture-pane", "-p", "-t", "view").stdout


def _pane_showing(env: Env, pattern: re.Pattern[str]) -> str | None:
    text = _pane(env)
    return text if pattern.search(text) else None


def _lines_of(proc: subprocess.Popen[str]) -> list[str]:
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        lines.extend(iter(proc.stdout.readline, ""))

    threading.Thread(target=read, daemon=True).start()
    return lines


def test_progress_line_on_a_terminal_and_plain_lines_when_piped(env: Env) -> None:
    names = ("SPOTRUN_HOME", "TMUX_TMPDIR", "PYTHONPATH")
    exports = " ".join(f"{k}={shlex.quote(env.vars[k])}" for k in names)
    launch = f"{shlex.quote(sys.executable)} -m spotrun launch digits-fast --set epochs=400"
    command = f"cd {shlex.quote(str(REPO))} && env -u TMUX {exports} {launch} --name tv; sleep 600"
    started = env.tmux("-L", "view", "new-session", "-d", "-s", "view", "-x", "150", "-y", "40")
    assert started.returncode == 0, started.stderr
    try:
        env.tmux("-L", "view", "send-keys", "-t", "view", command, "Enter")
        pane = wait_for(
            lambda: _pane_showing(env, PROGRESS),
            timeout=240,
            what="the progress line in the pane",
        )
        assert "running       job running" in pane  # the stages stay above it
        assert env.cli("stop", "tv").returncode == 0
        ended = wait_for(
            lambda: _pane_showing(env, re.compile("stopped in ")),
            timeout=120,
            what="the run's end in the pane",
        )
        shown = [line for line in ended.splitlines() if line.strip()]
        assert shown[-2].startswith("stopped in ") and "cost $0.00" in shown[-2]
        assert shown[-1] == "stopped by the user"
        assert not PROGRESS.search(ended)  # the live line went away with the run
    finally:
        env.tmux("-L", "view", "kill-server")

    # Piped (here, a resume followed in the foreground): plain progress lines, no escapes.
    proc = env.popen("resume", "tv")
    lines = _lines_of(proc)
    wait_for(lambda: any(PROGRESS.search(line) for line in lines), timeout=240, what="a plain line")
    assert env.cli("stop", "tv").returncode == 0
    assert proc.wait(timeout=120) == 1  # stopped, not succeeded
    text = "".join(lines)
    assert "\x1b" not in text and "\r" not in text
    assert "stopped in " in text


TRIAL = (
    r"trial {}: epoch \d+/400  step \d+/22  [\d,]+ img/s  ETA \S+  (acc [\d.]+%  )?\$0\.00 so far"
)
BOTH_TRIALS = re.compile(TRIAL.format(0) + r" \| " + TRIAL.format(1))


def test_a_foreground_sweeps_trials_share_one_progress_line_on_a_terminal(env: Env) -> None:
    names = ("SPOTRUN_HOME", "TMUX_TMPDIR", "PYTHONPATH")
    exports = " ".join(f"{k}={shlex.quote(env.vars[k])}" for k in names)
    sweep = (
        f"{shlex.quote(sys.executable)} -m spotrun sweep digits-fast --grid lr=0.1,0.2 "
        "--set epochs=400 --set threads=1 --max-parallel 2 --name tvs"
    )
    command = f"cd {shlex.quote(str(REPO))} && env -u TMUX {exports} {sweep}; sleep 600"
    started = env.tmux("-L", "view", "new-session", "-d", "-s", "view", "-x", "250", "-y", "40")
    assert started.returncode == 0, started.stderr
    try:
        env.tmux("-L", "view", "send-keys", "-t", "view", command, "Enter")
        # each live trial's epoch, step, speed, ETA and cost so far, side by side on one line
        pane = wait_for(
            lambda: _pane_showing(env, BOTH_TRIALS),
            timeout=300,
            what="both trials on the progress line",
        )
        assert "trial 0 (lr=0.1): running" in pane and "trial 1 (lr=0.2): running" in pane
        assert env.cli("sweep", "stop", "tvs", timeout=120).returncode == 0
        ended = wait_for(
            lambda: _pane_showing(env, re.compile("sweep stopped")),
            timeout=120,
            what="the sweep's end in the pane",
        )
        assert not re.search(r"img/s  ETA", ended)  # the live line went away with the sweep
    finally:
        env.tmux("-L", "view", "kill-server")
