"""What keeps the suite within its time on a small machine (issue 37.7): torch's threads wait
passively in every process the suite starts and on every lab host, and spotrun's modules are
compiled once rather than in every process a test starts."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from spotlab import Lab
from spotlab.harness import REPO, Env
from spotrun.cloud.aws import AwsProvider
from spotrun.cloud.base import InstanceRequest
from spotrun.core.config import Resources, load_settings
from tests.conftest import compile_sources

SHOW = "import os; print(os.environ.get('OMP_WAIT_POLICY'))"


def test_processes_here_and_sessions_on_lab_hosts_wait_passively(aws_env: Env, lab: Lab) -> None:
    here = subprocess.run(
        [sys.executable, "-c", SHOW], env=aws_env.vars, capture_output=True, text=True
    )
    assert here.stdout.strip() == "PASSIVE"
    provider = AwsProvider(load_settings(aws_env.home))
    (offer,) = provider.offers(Resources(instance_type="c6i.large", zone="us-east-1a"))
    (instance,) = provider.wait_ready(provider.launch(InstanceRequest("pace00000001", offer)), 20)
    on_host = provider.runner(instance).run("echo $OMP_WAIT_POLICY")
    assert on_host.stdout.strip() == "PASSIVE"


def test_spotruns_modules_are_compiled_ahead() -> None:
    source = REPO / "spotrun" / "core" / "rundir.py"
    compiled = Path(importlib.util.cache_from_source(str(source)))
    compiled.unlink(missing_ok=True)  # as in a fresh clone
    compile_sources()
    assert compiled.stat().st_mtime >= source.stat().st_mtime
