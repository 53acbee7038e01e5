"""`spotrun --help` and `spotrun ls` import only what they need (bench/cli_startup.py times them).

Each test runs the real CLI in a fresh interpreter and reads back which modules it loaded; a
heavy import creeping onto these paths (torch, the AWS or SSH SDKs, the launch machinery) fails
here, where a timing assertion would only be noise on a shared machine.
"""

from __future__ import annotations

from spotlab.harness import wait_for
from tests.conftest import Env
from tests.unit.cli.cli_probe import run_probe

# The CLI as a user runs it (spotrun/cli/entry.py's way in, then the full CLI), then the names
# of the loaded modules that matter, as JSON.
PROBE = """
import json, sys
from spotrun.cli.entry import quick_answer
code = quick_answer(sys.argv[1:])
if code is None:
    from spotrun.cli.main import _run
    code = _run(sys.argv[1:])
heavy = ("torch", "boto3", "botocore", "paramiko", "libtmux", "pydantic", "rich", "yaml",
         "numpy", "optuna", "matplotlib", "typer", "click")
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(heavy))
ours = sorted(m for m in sys.modules if m.startswith("spotrun."))
adapters = "typer._adapters" in sys.modules  # typer's pydantic coercion
print(json.dumps({"code": code, "loaded": loaded, "ours": ours, "typer_adapters": adapters}))
"""


def _loaded(env: Env, *args: str) -> dict[str, list[str]]:
    _said, found = run_probe(env, PROBE, *args)
    return found


def test_help_imports_no_sdk_no_library(env: Env) -> None:
    for args in (["--help"], ["-h"]):
        found = _loaded(env, *args)
        assert found["code"] == 0
        # the stored page (spotrun/cli/help_snapshot.py): not even typer or the command modules
        assert found["loaded"] == [], (args, found["loaded"])
        assert found["ours"] == sorted(QUICK_HELP), (args, found["ours"])
    for args in (["launch", "--help"], ["sweep", "run", "-h"], ["cost", "-h"]):
        found = _loaded(env, *args)
        assert found["code"] == 0
        # typer only: typer's unset --help flag would cost a pydantic TypeAdapter, and
        # spotrun's commands give it a default (spotrun/cli/typer_app.py)
        assert found["loaded"] == ["click", "typer"] or found["loaded"] == ["typer"], (
            args,
            found["loaded"],
        )
        assert not [m for m in found["ours"] if m.startswith("spotrun.service")], args


# what a plain `spotrun --help` loads of spotrun: the way in and the stored page
QUICK_HELP = {
    "spotrun.cli",
    "spotrun.cli.common",
    "spotrun.cli.entry",
    "spotrun.cli.help_snapshot",
    "spotrun.core",
    "spotrun.core.errors",
    "spotrun.core.home",
    "spotrun.core.rundir",  # names only: SPOTRUN_HOME's, the completion variable's
}


def test_ls_reads_the_ledger_without_the_launch_machinery(env: Env) -> None:
    env.cli("launch", "--cmd", "true", "--name", "probe", check=True, timeout=300)
    found = _loaded(env, "ls")
    assert found["code"] == 0
    # no typer (spotrun/cli/entry.py), no rich (spotrun/cli/plain_table.py), no config.toml
    # and nothing live: no settings to read, so no pydantic models either
    assert found["loaded"] == [], found["loaded"]
    for module in (
        "spotrun.service.runs",
        "spotrun.recipes",
        "spotrun.cloud.plan",
        "spotrun.remote",
        "spotrun.cli.main",
        "spotrun.core.config",
        # nothing live: no run control, and finished runs' costs are their settled lines
        "spotrun.control",
        "spotrun.sweep",
        "spotrun.cost.bills",
        "spotrun.cost.rules",
    ):
        assert not [m for m in found["ours"] if m == module or m.startswith(module + ".")], module
    # anything but the plain forms (here ls's help) is the full CLI's, through typer
    assert "typer" in _loaded(env, "ls", "-h")["loaded"]


def test_ls_checks_on_live_runs(env: Env) -> None:
    """With a run live, ls loads run control, which restarts a lost controller (that it does:
    tests/e2e/test_controller_away.py), and the billing rules that price the run so far."""
    launched = env.cli("launch", "--cmd", "sleep 600", "--name", "live", "-d", timeout=300)
    assert launched.returncode == 0, launched.stderr
    found = _loaded(env, "ls")
    assert found["code"] == 0 and found["loaded"] == ["pydantic"], found["loaded"]  # settings
    for module in ("spotrun.drive.supervisor", "spotrun.drive.revive", "spotrun.cost.bills"):
        assert module in found["ours"], module
    env.cli("stop", "live", check=True, timeout=300)


def test_ls_still_checks_a_config_file_that_exists(env: Env) -> None:
    env.cli("launch", "--cmd", "true", "--name", "probe", check=True, timeout=300)
    (env.home / "config.toml").write_text('default_cloud = "local"\n')
    found = _loaded(env, "ls")
    assert found["code"] == 0 and "spotrun.core.config" in found["ours"]
    (env.home / "config.toml").write_text("default_cloudd = 1\n")
    proc = env.cli("ls")
    assert proc.returncode == 2 and "unknown key 'default_cloudd'" in proc.stderr, proc.stderr


def test_status_of_a_run_reads_it_without_the_launch_machinery(env: Env) -> None:
    """`status RUN` is polled by people and scripts: it reads the run (service.lookup), never
    recipes, plans or the remote machinery that launching needs (0.6 s of CPU a call before,
    0.25 s after on this machine)."""
    env.cli("launch", "--cmd", "true", "--name", "probe", check=True, timeout=300)
    for args in (["status", "probe"], ["status", "probe", "--json"]):
        found = _loaded(env, *args)
        assert found["code"] == 0, args
        for module in ("spotrun.service.runs", "spotrun.recipes", "spotrun.cloud.plan"):
            assert not [m for m in found["ours"] if m == module or m.startswith(module + ".")], (
                args,
                module,
            )


def test_status_of_a_run_loads_no_pydantic(env: Env) -> None:
    """typer coerced `status RUN`'s argument through a pydantic TypeAdapter, and status
    validated the run's stored spec again to show its command: pydantic's import was half of
    the call's CPU (spotrun/cli/typer_values.py, RunRecord.job_command)."""
    env.cli("launch", "--cmd", "echo hi", "--name", "probe", check=True, timeout=300)
    said, found = run_probe(env, PROBE, "status", "probe")
    assert found["code"] == 0
    assert "pydantic" not in found["loaded"], found["loaded"]
    assert said[0].startswith("probe (") and "command 'echo hi'" in said[0], said


def test_launch_and_stop_skip_attach_and_the_cost_report(env: Env) -> None:
    """service.runs re-exports attach (libtmux) and the cost report (pricing, the recipe
    catalogue) at their first read: a launch never reads them; nor the data commands' packer
    and downloads (service.datasets), which a launch's data advice is apart from
    (service.data_advice). A stop loads service.stopping, without the launch machinery."""
    heavy_for_them = (
        "spotrun.service.attach",
        "spotrun.cost.cost_report",
        "spotrun.service.datasets",
        "spotrun.datasets.push",
    )
    found = _loaded(env, "launch", "--cmd", "sleep 600", "--name", "live", "-d")
    assert found["code"] == 0
    # (libtmux itself comes with the local cloud's provider, which plans the launch)
    assert "spotrun.service.runs" in found["ours"]
    assert not [m for m in heavy_for_them if m in found["ours"]], found["ours"]
    # a stop asks the run's controller; one made before it claimed the run drives it here
    wait_for(lambda: env.runs()[0]["state"] == "running", 120, "the run to be running")
    found = _loaded(env, "stop", "live")
    assert found["code"] == 0 and "spotrun.service.stopping" in found["ours"]
    # a stop is service.stopping's alone: not the library surface, nor launching's machinery
    launching = ("spotrun.service.runs", "spotrun.service.prepare", "spotrun.recipes")
    assert not [m for m in (*heavy_for_them, *launching) if m in found["ours"]], found["ours"]
    assert "libtmux" not in found["loaded"], found["loaded"]
    assert env.runs()[0]["state"] == "stopped"


def test_a_choice_option_is_coerced_without_pydantic(env: Env) -> None:
    """`launch --cloud local` (an Enum option, as `--cloud aws` is): typer's coercion of the
    choice went through a pydantic TypeAdapter built for it (a tenth of an AWS launch's CPU)."""
    found = _loaded(env, "launch", "--cmd", "true", "--cloud", "local", "--name", "x", "-d")
    assert found["code"] == 0
    assert found["typer_adapters"] is False
