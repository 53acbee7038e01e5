"""The root's commands are lazy (spotrun/cli/typer_app.py LazyGroup): a command imports its own
module, not every command's, and the summaries the root's help lists are the commands' own."""

from __future__ import annotations

import typer.main

from spotrun.cli.main import COMMANDS, app
from tests.conftest import Env
from tests.unit.cli.cli_probe import run_probe

PROBE = """
import json, sys
from spotrun.cli.main import _run
code = _run(sys.argv[1:])
print(json.dumps({"code": code, "cli": sorted(m for m in sys.modules if m.startswith("spotrun.cli."))}))
"""


def _cli_modules(env: Env, *args: str) -> list[str]:
    _said, found = run_probe(env, PROBE, *args)
    assert found["code"] == 0, found
    modules: list[str] = found["cli"]
    return modules


def test_a_command_imports_its_own_module_only(env: Env) -> None:
    loaded = _cli_modules(env, "status", "-h")
    assert "spotrun.cli.run_commands" in loaded
    for other in ("launch", "sweep", "data", "notify", "training", "doctor", "ui", "plot"):
        assert f"spotrun.cli.{other}" not in loaded, loaded
    # the root's help lists every command without importing one
    loaded = _cli_modules(env, "--help")
    assert not {"spotrun.cli.run_commands", "spotrun.cli.launch"} & set(loaded), loaded


def test_the_listed_summaries_are_the_commands_own() -> None:
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="spotrun")
    assert root.list_commands(ctx) == [command.name for command in COMMANDS]  # type: ignore[attr-defined]
    for command in COMMANDS:
        loaded = root.get_command(ctx, command.name)  # type: ignore[attr-defined]
        assert loaded is not None and loaded.get_short_help_str(10_000) == command.summary
