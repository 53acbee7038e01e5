"""`spotrun --help` and `spotrun ls` import only what they need (bench/cli_startup.py times them).

Each test runs the real CLI in a fresh interpreter and reads back which modules it loaded; a
heavy import creeping onto these paths (torch, the AWS or SSH SDKs, the launch machinery) fails
here, where a timing assertion would only be noise on a shared machine.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO, Env

# The CLI as a user runs it, then the names of the loaded modules that matter, as JSON.
PROBE = """
import json, sys
from spotrun.cli.main import _run
code = _run(sys.argv[1:])
heavy = ("torch", "boto3", "botocore", "paramiko", "libtmux", "pydantic", "rich", "yaml",
         "numpy", "optuna", "matplotlib")
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(heavy))
ours = sorted(m for m in sys.modules if m.startswith("spotrun."))
print(json.dumps({"code": code, "loaded": loaded, "ours": ours}))
"""


def _loaded(env: Env, *args: str) -> dict[str, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env=env.vars,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    found: dict[str, list[str]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def test_help_imports_no_sdk_no_library(env: Env) -> None:
    for args in (["--help"], ["-h"]):
        found = _loaded(env, *args)
        assert found["code"] == 0
        # typer and the CLI's own modules only: no SDKs, no pydantic models, no rich
        assert found["loaded"] == [], (args, found["loaded"])
        assert not [m for m in found["ours"] if m.startswith("spotrun.service")], args
    for args in (["launch", "--help"], ["sweep", "run", "-h"], ["cost", "-h"]):
        found = _loaded(env, *args)
        assert found["code"] == 0
        # nothing of weight: typer's unset --help flag would cost a pydantic TypeAdapter, and
        # spotrun's commands give it a default (spotrun/cli/typer_app.py)
        assert found["loaded"] == [], (args, found["loaded"])
        assert not [m for m in found["ours"] if m.startswith("spotrun.service")], args


def test_ls_reads_the_ledger_without_the_launch_machinery(env: Env) -> None:
    env.cli("launch", "--cmd", "true", "--name", "probe", check=True, timeout=300)
    found = _loaded(env, "ls")
    assert found["code"] == 0
    for heavy in ("torch", "boto3", "botocore", "paramiko", "libtmux", "numpy", "optuna"):
        assert heavy not in found["loaded"], heavy
    for module in ("spotrun.service.runs", "spotrun.recipes", "spotrun.launch", "spotrun.remote"):
        assert not [m for m in found["ours"] if m.startswith(module)], module
    # no config.toml and nothing live: no settings to read, so no pydantic models either
    assert "pydantic" not in found["loaded"]
    assert "spotrun.core.config" not in found["ours"]


def test_ls_still_checks_a_config_file_that_exists(env: Env) -> None:
    env.cli("launch", "--cmd", "true", "--name", "probe", check=True, timeout=300)
    (env.home / "config.toml").write_text('default_cloud = "local"\n')
    found = _loaded(env, "ls")
    assert found["code"] == 0 and "spotrun.core.config" in found["ours"]
    (env.home / "config.toml").write_text("default_cloudd = 1\n")
    proc = env.cli("ls")
    assert proc.returncode == 2 and "unknown key 'default_cloudd'" in proc.stderr, proc.stderr
