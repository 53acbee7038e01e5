"""The CLI's conventions, through the real command line: -h, --version, examples and choices
on every help page, one error prefix, one credentials message, prefixes and did-you-mean."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spotrun.cli.main import app
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.runstates import RunState
from spotrun.store.ledger import Ledger
from spotrun.store.sweep_spec import SweepSpec
from spotrun.store.sweeps import SweepState, SweepStore
from tests.conftest import Env
from tests.helpers import wait_for


def _leaf_commands() -> list[list[str]]:
    """Every command path a user can ask help of (`launch`, `sweep run`, ...)."""
    import typer.main

    found: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            found.append(path)
            return
        for name, sub in subcommands.items():
            if not getattr(sub, "hidden", False):  # internal (run by spotrun on an instance)
                walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_every_command_answers_h_with_examples() -> None:
    runner = CliRunner()
    commands = _leaf_commands()
    assert ["launch"] in commands and ["sweep", "run"] in commands and ["completion"] in commands
    for path in [[], *commands]:
        short = runner.invoke(app, [*path, "-h"], prog_name="spotrun")
        long = runner.invoke(app, [*path, "--help"], prog_name="spotrun")
        assert short.exit_code == 0, (path, short.output)
        assert short.output == long.output, path
        assert "Examples:" in short.output, f"`spotrun {' '.join(path)} -h` shows no examples"
        # each example line is a real command of this program
        examples = short.output.split("Examples:", 1)[1].split("\n\n", 1)[0].splitlines()
        assert examples and all(
            line.strip().startswith(("spotrun", "eval")) for line in examples if line.strip()
        ), (path, examples)


def test_enum_options_list_their_choices() -> None:
    runner = CliRunner()
    sweep_help = runner.invoke(app, ["sweep", "run", "-h"], prog_name="spotrun").output
    assert "--cloud <local|aws>" in sweep_help
    assert "--pruner, --early-stop <none|asha|hyperband>" in sweep_help
    assert "--search <random|grid|tpe|cmaes|qmc|pbt>" in sweep_help
    assert "--mode <max|min>" in sweep_help
    launch_help = runner.invoke(app, ["launch", "-h"], prog_name="spotrun").output
    assert "--cloud <local|aws>" in launch_help
    cost_help = runner.invoke(app, ["cost", "-h"], prog_name="spotrun").output
    assert "--by <run|day|instance-type>" in cost_help
    plot_help = runner.invoke(app, ["plot", "-h"], prog_name="spotrun").output
    assert "--x <step|time|cost>" in plot_help
    push_help = runner.invoke(app, ["data", "push", "-h"], prog_name="spotrun").output
    assert "--tokenizer <gpt2|char|byte>" in push_help
    # and every option with a fixed set of values, wherever it is, shows them
    import typer.main

    root = typer.main.get_command(app)
    checked = 0
    for path in _leaf_commands():
        command = root
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        page = runner.invoke(app, [*path, "-h"], prog_name="spotrun").output
        for param in command.params:
            kind = param.type_descriptor.annotation  # type: ignore[attr-defined]
            if isinstance(kind, type) and issubclass(kind, Enum):
                shown = "<" + "|".join(str(choice.value) for choice in kind) + ">"
                assert shown in page, (path, param.opts, shown)
                checked += 1
    assert checked >= 8  # --cloud twice, --early-stop, --mode, --by, --x, --tokenizer, SHELL


def test_version(env: Env) -> None:
    from spotrun import __version__

    proc = env.cli("--version", check=True)
    assert proc.stdout == f"spotrun {__version__}\n"


@pytest.mark.parametrize(
    "args",
    [
        ["ls", "--bogus"],
        ["stop"],  # stop what? (a bare `status` lists the runs)
        ["sweep", "run", "digits-fast", "--cloud", "gcp"],
        ["sweep", "run", "digits-fast", "--early-stop", "median"],
        ["launch", "digits-fast", "--gpus", "two"],
        ["status", "no-such-run"],
        ["bogus"],
    ],
)
def test_every_error_has_one_prefix(env: Env, args: list[str]) -> None:
    proc = env.cli(*args)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr and "Error:" not in proc.stderr


def test_a_bad_choice_names_the_choices(env: Env) -> None:
    proc = env.cli("sweep", "run", "digits-fast", "--cloud", "gcp")
    assert "'local'" in proc.stderr and "'aws'" in proc.stderr


def _no_credentials(env: Env, tmp_path: Path) -> dict[str, str]:
    variables = {k: v for k, v in env.vars.items() if not k.startswith("AWS_")}
    variables["AWS_CONFIG_FILE"] = str(tmp_path / "no-aws-config")
    variables["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "no-aws-credentials")
    variables["AWS_EC2_METADATA_DISABLED"] = "true"  # no instance role to find either
    return variables


@pytest.mark.parametrize(
    ("extra", "wanted"),
    [
        ({"AWS_PROFILE": "nope"}, "error: AWS profile 'nope' is not in the AWS config files"),
        ({"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE"}, "error: incomplete AWS credentials"),
    ],
)
def test_unusable_credentials_read_the_same_in_every_command(
    env: Env, tmp_path: Path, extra: dict[str, str], wanted: str
) -> None:
    env.vars = {**_no_credentials(env, tmp_path), **extra}
    lines = []
    for args in (
        ["launch", "digits-fast", "--cloud", "aws", "--detach"],
        ["gc"],
    ):
        proc = env.cli(*args)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        lines.append(proc.stderr.strip())
    assert lines[0] == lines[1] and lines[0].startswith(wanted), lines
    assert "aws configure" in lines[0]  # and what to do about it
    assert not env.runs()  # nothing was recorded, let alone launched


def test_cost_takes_a_sweep_by_name_or_id_prefix(env: Env) -> None:
    ledger = Ledger(load_settings(env.home))
    store = SweepStore(ledger)
    sweep = store.create(SweepSpec(recipe="digits-fast", max_parallel=1, name="lr-scan"), [], {})
    store.end(sweep.id, SweepState.COMPLETED, "done")
    trial = ledger.create_run(LaunchSpec(recipe="digits-fast", name="trial-0"), sweep_id=sweep.id)
    alone = ledger.create_run(LaunchSpec(recipe="digits-fast", name="alone"))
    for run in (trial, alone):  # ended: no command revives them
        ledger.transition(run.id, RunState.STOPPED, "made by the test")
    ledger.close()
    for ref in (sweep.id, sweep.id[:4], "lr-scan"):
        proc = env.cli("cost", "--sweep", ref, "--json", check=True)
        assert [row["run"] for row in json.loads(proc.stdout)] == ["trial-0"], ref
    proc = env.cli("cost", "--sweep", "no-such-sweep")
    assert proc.returncode != 0 and proc.stderr.startswith("error: no run belongs to sweep")


def test_config_keys_get_did_you_mean(env: Env) -> None:
    env.home.mkdir(parents=True, exist_ok=True)
    (env.home / "config.toml").write_text('default_clod = "aws"\n[aws]\nregionn = "eu-west-1"\n')
    proc = env.cli("ls")
    assert proc.returncode == 2
    assert "unknown key 'default_clod' (did you mean default_cloud?)" in proc.stderr
    assert "unknown key 'aws.regionn' (did you mean region" in proc.stderr


def test_task_file_keys_get_did_you_mean(env: Env, tmp_path: Path) -> None:
    task = tmp_path / "task.yaml"
    task.write_text("name: t\nrun: echo hi\nresources: {gpu: 1}\nenvz: {A: '1'}\n")
    proc = env.cli("launch", str(task))
    assert proc.returncode == 2
    assert "unknown key 'resources.gpu' (did you mean gpus?)" in proc.stderr
    assert "unknown key 'envz' (did you mean envs?)" in proc.stderr
    assert not env.runs()


def test_every_command_takes_a_run_or_sweep_by_id_prefix(env: Env) -> None:
    """Each command that names a run or a sweep resolves a unique prefix of its id (here each
    answers about the one run or sweep, whatever it then says about its state)."""
    launched = env.cli("launch", "--cmd", "echo hi", "--name", "pref", "-d", check=True)
    run_id = launched.stdout.strip()
    ledger = Ledger(load_settings(env.home))
    store = SweepStore(ledger)
    sweep = store.create(SweepSpec(recipe="digits-fast", max_parallel=1, name="scan"), [], {})
    store.end(sweep.id, SweepState.COMPLETED, "done")
    ledger.close()
    wait_for(lambda: env.runs()[0]["state"] == "succeeded", timeout=120, what="the run's end")
    run, swp = run_id[:5], sweep.id[:4]
    for args, said_about in (
        (["status", run], "pref"),
        (["logs", run], "hi"),
        (["cost", run], "pref"),
        (["plot", run, "--json"], "pref"),
        (["ssh", run, "true"], "pref"),
        (["resume", run], "pref"),
        (["attach", run], "pref"),
        (["exec", run, "--cmd", "true"], "pref"),
        (["stop", run], "pref"),
        (["pull", run], "pref"),
        (["sample", run], run_id),
        (["sweep", "status", swp], "scan"),
        (["sweep", "leaderboard", swp], "scan"),
        (["sweep", "stop", swp], "scan"),
        (["plot", swp, "--json"], "scan"),  # cost --sweep: test_cost_takes_a_sweep_by_...
    ):
        proc = env.cli(*args)
        said = proc.stdout + proc.stderr
        assert "no run" not in said and "no sweep" not in said, (args, said)
        assert said_about in said, (args, said)
    assert env.cli("rm", run, check=True).returncode == 0 and env.runs() == []
