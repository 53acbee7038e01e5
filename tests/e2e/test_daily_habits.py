"""Habits from SkyPilot and tmux (issue 34, point 6), through the real CLI on the local cloud:
`status` with no run lists runs, `logs --tail N`, `stop RUN...` and `stop --all` (asked on a
real terminal, a tmux pane; refused without one unless --yes), `prices --gpus N` exactly N, and
recipe names completed wherever a recipe is taken."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.rundir import JOB_LOG_FILE
from spotrun.core.runstates import RunState
from spotrun.recipes import recipe_names
from spotrun.store.ledger import Ledger
from tests.conftest import REPO, Env
from tests.helpers import wait_for


def _ended_run(env: Env, name: str) -> str:
    with Ledger(load_settings(env.home)) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", name=name))
        ledger.transition(run.id, RunState.FAILED, "made by the test")
        return run.id


def test_status_without_a_run_lists_the_runs_as_ls_does(env: Env) -> None:
    _ended_run(env, "first")
    listed = env.cli("status", check=True)
    assert "first" in listed.stdout and listed.stdout == env.cli("ls", check=True).stdout
    as_json = json.loads(env.cli("status", "--json", check=True).stdout)
    assert [r["name"] for r in as_json] == ["first"]


def test_logs_tail_prints_the_last_lines_only(env: Env) -> None:
    run_id = _ended_run(env, "chatty")
    log = env.home / "runs" / run_id / JOB_LOG_FILE
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(f"line {i}\n" for i in range(1, 101)))
    assert env.cli("logs", "chatty", "--tail", "3", check=True).stdout == (
        "line 98\nline 99\nline 100\n"
    )
    assert env.cli("logs", "chatty", "-n", "0", check=True).stdout == ""
    assert env.cli("logs", "chatty", check=True).stdout.count("\n") == 100
    bad = env.cli("logs", "chatty", "--tail", "-2")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --tail must be 0 or more")


def _state(env: Env, name: str) -> str:
    state: str = json.loads(env.cli("status", name, "--json", check=True).stdout)["state"]
    return state


@pytest.mark.slow
def test_stop_takes_several_runs_and_all_asks_first(env: Env) -> None:
    for name in ("one", "two"):
        env.cli("launch", "--cmd", "sleep 600", "-d", "--name", name, check=True, timeout=300)
    wait_for(
        lambda: all(_state(env, n) == "running" for n in ("one", "two")),
        timeout=240,
        what="both runs running",
    )
    # no terminal to ask on: refused, nothing stopped
    piped = env.cli("stop", "--all")
    assert piped.returncode == 2 and "add --yes" in piped.stderr, piped.stderr
    assert piped.stderr.count("\n") == 1 and "one, two" in piped.stderr
    # a real terminal (a tmux pane of our own): asked, answered no
    env.tmux("-L", "outer", "new-session", "-d", "-x", "150", "-y", "20")
    try:
        env.tmux("-L", "outer", "send-keys", f"{sys.executable} -m spotrun stop --all", "Enter")
        screen = lambda: env.tmux("-L", "outer", "capture-pane", "-p", "-J").stdout  # noqa: E731
        wait_for(lambda: "stop 2 live run(s): one, two? [y/N]" in screen(), what="the question")
        env.tmux("-L", "outer", "send-keys", "n", "Enter")
        wait_for(lambda: "nothing stopped" in screen(), what="the answer taken")
    finally:
        env.tmux("-L", "outer", "kill-server")
    assert {_state(env, n) for n in ("one", "two")} == {"running"}
    # a typo among the runs stops none of them
    typo = env.cli("stop", "one", "nosuch")
    assert typo.returncode != 0 and "nosuch" in typo.stderr
    assert _state(env, "one") == "running"
    # several at once
    both = env.cli("stop", "one", "two", check=True, timeout=300)
    assert both.stdout.split("\n")[:2] == ["one stopped", "two stopped"], both.stdout
    # an ended run: one clear line, no "stopping ..." before it
    again = env.cli("stop", "one")
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr == "error: run one has already ended (stopped): nothing to stop\n"
    assert env.cli("stop", "--all", check=True).stdout == "no live runs: nothing to stop\n"


@pytest.fixture
def offline(env: Env, tmp_path: Path) -> Env:
    """No credentials anywhere boto3 looks: prices come from the shipped catalog."""
    env.vars = {k: v for k, v in env.vars.items() if not k.startswith("AWS_")}
    env.vars["AWS_CONFIG_FILE"] = str(tmp_path / "no-aws-config")
    env.vars["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "no-aws-credentials")
    env.vars["AWS_EC2_METADATA_DISABLED"] = "true"
    return env


def test_prices_gpus_is_exact_and_min_gpus_is_at_least(offline: Env) -> None:
    def counts(*args: str) -> set[int]:
        offers = json.loads(offline.cli("prices", *args, "--json", check=True).stdout)
        return {o["gpus"] for o in offers}

    assert counts("--gpus", "1") == {1}
    assert counts("--gpus", "4") == {4}
    assert counts("--min-gpus", "4") == {4, 8}
    assert counts() >= {1, 4, 8}  # no count asked: every GPU type
    both = offline.cli("prices", "--gpus", "1", "--min-gpus", "2")
    assert both.returncode == 2 and both.stderr.count("\n") == 1, both.stderr


def _complete(env: Env, words: str) -> list[str]:
    """What fish's completion script is told for `words` (the protocol typer's scripts use)."""
    variables = {
        **env.vars,
        "_SPOTRUN_COMPLETE": "complete_fish",
        "_TYPER_COMPLETE_ARGS": words,
        "_TYPER_COMPLETE_FISH_ACTION": "get-args",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "spotrun"],
        capture_output=True,
        text=True,
        env=variables,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return [line.split("\t")[0] for line in proc.stdout.splitlines() if line]


def test_recipe_names_complete_wherever_a_recipe_is_taken(env: Env) -> None:
    cifar = sorted(n for n in recipe_names() if n.startswith("cifar10-"))
    assert len(cifar) >= 2
    assert _complete(env, "spotrun launch dig") == ["digits-fast"]
    assert sorted(_complete(env, "spotrun recipes show cifar10-")) == cifar
    assert sorted(_complete(env, "spotrun sweep cifar10-")) == cifar
    assert sorted(_complete(env, "spotrun sweep run cifar10-")) == cifar
    assert "spotlab/" in _complete(env, "spotrun launch spot")  # a task file's folder too
