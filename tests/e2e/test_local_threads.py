"""The local cloud trains on one thread per free core and says so in the run's events.

Real CLI, real torch, real busy processes: two pinned CPU-bound loops fill the two cores the
launch may use (taskset), so however busy the machine is otherwise, one core's worth is the
most that can be free and the trainer must take one thread, not the recipe's two."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import Env

pytestmark = pytest.mark.slow

CORES = sorted(os.sched_getaffinity(0))[:2]
QUICK = ["--set", "epochs=1"]


def _launch(env: Env, *args: str) -> tuple[str, str]:
    """Launch in the foreground on the launch's cores; (the run's threads event, its job.log)."""
    pin = ["taskset", "-c", ",".join(map(str, CORES))]
    proc = subprocess.run(
        [*pin, sys.executable, "-m", "spotrun", "launch", "digits-fast", *QUICK, *args],
        capture_output=True,
        text=True,
        env=env.vars,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    name = args[args.index("--name") + 1]
    status = json.loads(env.cli("status", name, "--json", check=True).stdout)
    (event,) = [e["message"] for e in status["events"] if e["kind"] == "threads"]
    return event, (env.home / "runs" / status["id"] / "job.log").read_text()


@pytest.fixture
def both_cores_busy() -> Iterator[None]:
    loops = [
        subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c", "while True: pass"])
        for core in CORES
    ]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


@pytest.mark.skipif(len(CORES) < 2, reason="needs two cores to fill")
def test_busy_cores_get_one_thread_and_a_given_count_is_kept(
    env: Env, both_cores_busy: None
) -> None:
    event, log = _launch(env, "--name", "chosen")
    assert event.startswith("training on 1 thread: 1 of 2 cores free (")
    assert "from /proc/stat" in event and "the recipe asks for up to 2" in event
    assert "; 1 CPU threads" in log

    event, log = _launch(env, "--name", "given", "--set", "threads=2")
    assert event == "training threads as given with --set threads"
    assert "; 2 CPU threads" in log
