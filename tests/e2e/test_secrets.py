"""`--env` values are secrets: while a job with a canary value runs, no process on the machine
carries it on its command line (tmux's server, the agent, the wrapper), the job still gets it
(and so does `spotrun exec`), and SPOTRUN_HOME and its ledger are the user's alone. Locally
and in the lab (sshd hosts: the instance's processes are visible in this machine's /proc)."""

from __future__ import annotations

import hashlib
import json
import stat
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab.fixtures import use_lab
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

JOB = """\
import hashlib, os, pathlib, time
pathlib.Path("results").mkdir(exist_ok=True)
token = os.environ.get("API_TOKEN", "")
pathlib.Path("results/seen.txt").write_text(hashlib.sha256(token.encode()).hexdigest())
print("job ready", flush=True)
while not pathlib.Path("go").exists():
    time.sleep(0.1)
"""
EXEC = (
    f"{sys.executable} -c 'import hashlib, os; "
    'print("exec", hashlib.sha256(os.environ["API_TOKEN"].encode()).hexdigest())\'; touch go'
)


def _task(folder: Path) -> Path:
    (folder / "proj").mkdir(parents=True)
    (folder / "proj" / "job.py").write_text(JOB)
    task = folder / "task.yaml"
    task.write_text(
        "name: secretive\nresources: {gpus: 0}\nworkdir: proj\n"
        f"run: {json.dumps(sys.executable + ' job.py')}\noutputs: [results]\nmax_hours: 1\n"
    )
    return task


def _command_lines_holding(canary: bytes) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue  # it ended while we looked
        if canary in cmdline:
            shown = cmdline.replace(b"\0", b" ")[:300]
            found.append(f"{proc.name}: {shown!r}")
    return found


def _check_run(env: Env, task: Path, cloud: str) -> str:
    canary = f"canary-{uuid.uuid4().hex}"
    digest = hashlib.sha256(canary.encode()).hexdigest()
    run_id = env.cli(
        "launch", str(task), "-d", "--cloud", cloud, "--env", f"API_TOKEN={canary}", check=True
    ).stdout.strip()
    wait_for(
        lambda: "job ready" in env.cli("logs", run_id).stdout, timeout=120, what="the job to run"
    )
    assert _command_lines_holding(canary.encode()) == []
    home_files = [env.home / "ledger.db", env.home / "ledger.db-wal", env.home / "ledger.db-shm"]
    assert stat.S_IMODE(env.home.stat().st_mode) == 0o700
    for path in home_files:
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    done = env.cli("exec", run_id, "--cmd", EXEC)
    assert done.returncode == 0 and f"exec {digest}" in done.stdout, (done.stdout, done.stderr)
    wait_for(lambda: env.run_state(run_id) in ("succeeded", "failed"), timeout=120, what="the end")
    assert env.run_state(run_id) == "succeeded"
    seen = env.home / "runs" / run_id / "workdir" / "results" / "seen.txt"
    assert seen.read_text() == digest  # the job got the value itself
    return run_id


def test_env_values_stay_off_command_lines_on_the_local_cloud(env: Env, tmp_path: Path) -> None:
    # An older, world-readable home is tightened when spotrun opens it.
    env.home.mkdir(mode=0o755)
    env.home.chmod(0o755)
    run_id = _check_run(env, _task(tmp_path), "local")
    env_file = env.home / "runs" / run_id / ".job-env.json"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600


@pytest.fixture
def lab_env(env: Env, lab: Lab) -> Iterator[Env]:
    with use_lab(env, lab):
        yield env


def test_env_values_stay_off_command_lines_in_the_lab(lab_env: Env, tmp_path: Path) -> None:
    _check_run(lab_env, _task(tmp_path), "aws")
