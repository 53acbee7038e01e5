"""Ctrl-C inside `spotrun attach`, in a real terminal (a tmux pane) on the local cloud: attach
says how to leave before it attaches, `--read-only` is tmux's own read-only client, and a job
ended by Ctrl-C reads as a stop from the terminal that `resume` goes on from, not a crash."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


def _status(env: Env, ref: str) -> dict[str, Any]:
    return json.loads(env.cli("status", ref, "--json", check=True).stdout)


def _terminal(env: Env, command: str) -> None:
    """A terminal of our own: a second tmux server whose pane runs `command`."""
    env.tmux("-L", "outer", "new-session", "-d", "-x", "200", "-y", "40", f"{command}; sleep 300")


def _screen(env: Env) -> str:
    return env.tmux("-L", "outer", "capture-pane", "-p", "-J").stdout


def _clients(env: Env, session: str) -> str:
    """The run's session's clients, each as its read-only flag (1: read-only)."""
    listed = env.tmux("list-clients", "-t", f"={session}", "-F", "#{client_readonly}")
    return listed.stdout.strip()


def test_ctrl_c_in_attach_is_a_stop_that_resume_goes_on_from(env: Env) -> None:
    launched = env.cli("launch", "digits-fast", "-d", "--name", "long", "--set", "epochs=400")
    assert launched.returncode == 0, launched.stderr
    run_id = launched.stdout.strip()
    session = f"spotrun-{run_id}"
    checkpoints = env.home / "runs" / run_id / "checkpoints"
    wait_for(lambda: list(checkpoints.glob("ckpt-*.pt")), timeout=240, what="a checkpoint")
    # A live run keeps its name: launching another under it is refused, nothing launched.
    taken = env.cli("launch", "digits-fast", "-d", "--name", "long")
    assert taken.returncode == 2 and "a live run keeps its name" in taken.stderr, taken.stderr
    assert len(env.runs()) == 1
    attach = f"{sys.executable} -m spotrun attach long"
    try:
        # Read-only: tmux's own read-only client; leaving it leaves the job running.
        _terminal(env, f"{attach} --read-only")
        wait_for(lambda: _clients(env, session) == "1", what="a read-only client")
        env.tmux("detach-client", "-s", f"={session}")
        wait_for(lambda: "[detached" in _screen(env), what="the read-only client to leave")
        assert "watching long read-only: leave with Ctrl-b d" in _screen(env)
        env.tmux("-L", "outer", "kill-server")
        assert _status(env, "long")["state"] == "running"

        # Attached for real: Ctrl-C typed in the terminal reaches the job and ends it.
        _terminal(env, attach)
        wait_for(lambda: _clients(env, session) == "0", what="an attached client")
        env.tmux("-L", "outer", "send-keys", "C-c")
        wait_for(lambda: _status(env, "long")["state"] == "stopped", timeout=120, what="a stop")
        # Before it attached, attach said how to leave and what Ctrl-C does there.
        wait_for(lambda: "Ctrl-b d" in _screen(env), what="the terminal back")
        assert "attaching to long: leave with Ctrl-b d" in _screen(env)
        assert "Ctrl-C there reaches the job" in _screen(env)
    finally:
        env.tmux("-L", "outer", "kill-server")
        env.cli("stop", run_id)

    run = _status(env, "long")
    step = max(int(p.name[5:14]) for p in checkpoints.glob("ckpt-*.pt"))
    said = f"interrupted from the terminal (Ctrl-C); `spotrun resume long` goes on from step {step}"
    assert run["message"] == said, run["message"]
    assert said in env.cli("status", "long", check=True).stdout  # no raw log lines
    (listed,) = env.runs()
    assert listed["state"] == "stopped" and listed["message"] == said
