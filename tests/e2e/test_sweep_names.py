"""Sweep names and `spotrun sweep rm` through the real CLI on the local cloud: a live sweep
keeps its name and cannot be removed; once ended, a new sweep takes its exact name (the old
one and its trials get a numbered suffix) and `sweep rm` forgets it, trials and folders."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

SWEEP = ["sweep", "digits-fast", "--grid", "lr=0.1", "--set", "threads=1", "--name", "sw"]


def _sweeps(env: Env) -> list[dict[str, Any]]:
    return json.loads(env.cli("sweep", "ls", "--json", check=True).stdout)


def test_a_new_sweep_takes_an_ended_ones_name_and_sweep_rm_forgets_it(env: Env) -> None:
    first = env.cli(*SWEEP, "--set", "epochs=400", "-d", check=True).stdout.strip()
    wait_for(lambda: env.sessions() != [], timeout=60, what="the trial to run")
    live_rm = env.cli("sweep", "rm", "sw")
    assert live_rm.returncode == 1 and "`spotrun sweep stop sw` first" in live_rm.stderr
    taken = env.cli(*SWEEP, "-d")
    assert taken.returncode == 2 and "a live sweep keeps its name" in taken.stderr, taken.stderr
    assert len(_sweeps(env)) == 1 and len(env.runs()) == 1  # nothing launched
    env.cli("sweep", "stop", "sw", check=True, timeout=120)
    (old_trial,) = env.runs()

    second = env.cli(*SWEEP, "--set", "epochs=1", timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "took the name 'sw'; the ended sweep that had it is now 'sw-1'" in second.stderr
    names = {s["name"]: s["id"] for s in _sweeps(env)}
    assert names["sw-1"] == first and set(names) == {"sw", "sw-1"}
    runs = {r["name"]: r for r in env.runs()}
    assert set(runs) == {"sw-1-t0", "sw-t0"} and runs["sw-1-t0"]["id"] == old_trial["id"]

    removed = env.cli("sweep", "rm", "sw-1")
    assert removed.returncode == 0, removed.stderr
    assert "removed sweep sw-1" in removed.stdout and "1 trial run" in removed.stdout
    assert [s["name"] for s in _sweeps(env)] == ["sw"]
    assert [r["name"] for r in env.runs()] == ["sw-t0"]
    assert not (env.home / "runs" / old_trial["id"]).exists()
    assert not (env.home / "sweeps" / first).exists()
    assert (env.home / "runs" / runs["sw-t0"]["id"]).is_dir()  # the other sweep's trial stays
