"""Shell completion through the real mechanism: the script `spotrun completion SHELL` prints,
run by bash itself, and the environment protocol that the zsh and fish scripts speak."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.runstates import RunState
from spotrun.store.ledger import Ledger
from tests.conftest import REPO, Env


def _with_runs(env: Env, *names: str) -> list[str]:
    """Runs in the ledger, ended (so that no spotrun command revives them)."""
    with Ledger(load_settings(env.home)) as ledger:
        ids = [ledger.create_run(LaunchSpec(recipe="digits-fast", name=n)).id for n in names]
        for run_id in ids:
            ledger.transition(run_id, RunState.STOPPED, "made by the test")
        return ids


def _spotrun_on_path(env: Env, tmp_path: Path) -> dict[str, str]:
    """A `spotrun` command on PATH that runs this checkout, as an installed one would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "spotrun"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m spotrun "$@"\n')
    launcher.chmod(0o755)
    return {**env.vars, "PATH": f"{bin_dir}{os.pathsep}{env.vars.get('PATH', '')}"}


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_commands_choices_and_run_names(env: Env, tmp_path: Path) -> None:
    _with_runs(env, "bert-small", "bert-large", "gpt")
    variables = _spotrun_on_path(env, tmp_path)

    def complete(*words: str) -> list[str]:
        line = " ".join(f"'{w}'" for w in words)
        script = (
            'eval "$(spotrun completion bash)"\n'
            f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}\n"
            "_spotrun_completion spotrun\n"
            'printf "%s\\n" "${COMPREPLY[@]}"\n'
        )
        proc = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c", script],
            capture_output=True,
            text=True,
            env=variables,
            cwd=REPO,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        return [line for line in proc.stdout.splitlines() if line]

    assert sorted(complete("spotrun", "logs", "bert")) == ["bert-large", "bert-small"]
    assert complete("spotrun", "status", "g") == ["gpt"]
    assert set(complete("spotrun", "st")) == {"status", "stop"}
    assert complete("spotrun", "sweep", "run", "digits-fast", "--early-stop", "") == [
        "none",
        "asha",
        "hyperband",
    ]


def test_zsh_and_fish_get_run_names_with_their_state(env: Env) -> None:
    run_ids = _with_runs(env, "bert-small")

    def ask(shell: str, args: str, **extra: str) -> str:
        variables = {
            **env.vars,
            "_SPOTRUN_COMPLETE": f"complete_{shell}",
            "_TYPER_COMPLETE_ARGS": args,
            **extra,
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
        return proc.stdout

    zsh = ask("zsh", "spotrun stop be")
    assert '"bert-small":"stopped"' in zsh
    fish = ask("fish", "spotrun logs be", _TYPER_COMPLETE_FISH_ACTION="get-args")
    assert fish.strip() == "bert-small\tstopped"
    # an id prefix completes to the id when no name starts with it
    by_id = ask("fish", f"spotrun status {run_ids[0][:3]}", _TYPER_COMPLETE_FISH_ACTION="get-args")
    assert by_id.split("\t")[0] == run_ids[0]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_each_shells_script(env: Env, shell: str) -> None:
    proc = env.cli("completion", shell, check=True)
    assert "_SPOTRUN_COMPLETE=complete_" + shell in proc.stdout


def test_completion_without_a_ledger_offers_nothing(env: Env) -> None:
    variables = {
        **env.vars,
        "_SPOTRUN_COMPLETE": "complete_fish",
        "_TYPER_COMPLETE_ARGS": "spotrun logs ",
        "_TYPER_COMPLETE_FISH_ACTION": "get-args",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "spotrun"], capture_output=True, text=True, env=variables, cwd=REPO
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr
    assert not (env.home / "ledger.db").exists()  # completing created nothing
