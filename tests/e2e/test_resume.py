"""`spotrun resume` and `spotrun rm` through the real CLI on the local cloud: a run stopped
mid-training goes on from its checkpoint (same run, name and id) and finishes; live and
succeeded runs are refused with what to do; rm forgets an ended run and its folder."""

from __future__ import annotations

import json
import subprocess
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


def _run(env: Env, ref: str) -> dict[str, Any]:
    return json.loads(env.cli("status", ref, "--json", check=True).stdout)


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_stopped_run_resumes_from_its_checkpoint_and_rm_forgets_it(env: Env) -> None:
    # --gpus 0 is accepted for a recipe as for a task file: the run needs no GPU
    args = ["-d", "--name", "long", "--gpus", "0", "--set", "epochs=400"]
    launched = env.cli("launch", "digits-fast", *args)
    assert launched.returncode == 0, launched.stderr
    run_id = launched.stdout.strip()
    run_dir = env.home / "runs" / run_id
    wait_for(lambda: len(_metrics(run_dir)) >= 2, timeout=240, what="two epochs")

    # A live run: resume and rm both refuse, saying what to do instead.
    live = env.cli("resume", "long")
    assert live.returncode == 1 and "has not ended" in live.stderr, live.stderr
    assert "spotrun stop long" in live.stderr
    kept = env.cli("rm", run_id[:5])
    assert kept.returncode == 1 and "`spotrun stop long` first" in kept.stderr, kept.stderr

    assert env.cli("stop", "long").returncode == 0
    stopped = _run(env, "long")
    assert stopped["state"] == "stopped"
    before = _metrics(run_dir)
    stopped_epoch = before[-1]["epoch"]
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").glob("ckpt-*.pt"))
    assert checkpoints, "the stop let the trainer checkpoint"
    resumed_at = int(checkpoints[-1][5:14])

    # Resumed in the foreground with two more epochs to go: the same run goes on to the end.
    target = stopped_epoch + 2
    proc = env.cli("resume", run_id[:6], "--set", f"epochs={target}", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"resuming long ({run_id}) from {checkpoints[-1]}" in proc.stderr
    assert "succeeded" in proc.stdout and f"epoch {target}/{target}" in proc.stdout
    assert "epoch 1/" not in proc.stdout  # the history before the resume is not shown again

    run = _run(env, "long")
    assert (run["id"], run["name"], run["state"]) == (run_id, "long", "succeeded")
    epochs = [m["epoch"] for m in _metrics(run_dir)]
    assert epochs == list(range(1, target + 1)), epochs  # each evaluation once, none from zero
    steps = [m["step"] for m in _metrics(run_dir)]
    assert steps == sorted(steps) and steps[stopped_epoch] > resumed_at
    log = (run_dir / "job.log").read_text()
    assert f"resumed at epoch {resumed_at // 22} step {resumed_at}" in log  # 22 steps an epoch
    moves = [(t["from"], t["to"]) for t in run["transitions"]]
    assert ("stopped", "planned") in moves and moves[-1] == ("syncing", "succeeded")
    # Two instances, one cost line each: the run's cost is every instance it had.
    instances = run["instances"]
    assert [i["state"] for i in instances] == ["terminated", "terminated"]
    assert len({i["id"] for i in instances}) == 2
    assert sorted(c["instance_id"] for c in run["cost_lines"]) == sorted(i["id"] for i in instances)
    assert any(e["kind"] == "resume" and checkpoints[-1] in e["message"] for e in run["events"])

    # Succeeded: nothing to resume, and the message says how to train more.
    again = env.cli("resume", "long")
    assert again.returncode == 1 and "succeeded" in again.stderr and "--set epochs=" in again.stderr

    removed = env.cli("rm", run_id[:6])
    assert removed.returncode == 0, removed.stderr
    assert not run_dir.exists()
    assert env.runs() == []
    assert env.cli("status", run_id).returncode == 2  # no such run any more


def _reader(proc: subprocess.Popen[str]) -> list[str]:
    """The lines proc prints, collected as they come (a thread reads its stdout)."""
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def test_task_name_is_the_run_name_and_its_output_streams_in_the_foreground(
    env: Env, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    task = tmp_path / "task.yaml"
    script = (
        f"echo first; echo to-stderr >&2; while [ ! -e {gate} ]; do sleep 0.1; done; echo second"
    )
    task.write_text(f"name: my-task\nresources: {{gpus: 0}}\nrun: {json.dumps(script)}\n")

    proc = env.popen("launch", str(task))
    lines = _reader(proc)
    # "first" shows while the job still runs (it waits for the gate): streamed, not at the end
    wait_for(lambda: any(line.strip() == "first" for line in lines), timeout=120, what="first")
    assert not any("second" in line for line in lines)
    gate.touch()
    assert proc.wait(timeout=120) == 0, "".join(lines)
    text = "".join(lines)
    assert "to-stderr" in text and "second" in text and "succeeded" in text
    assert text.index("first") < text.index("second") < text.index("succeeded")

    (run,) = env.runs()
    assert run["name"] == "my-task"  # the task's name, as written
    assert "second" in env.cli("logs", "my-task", check=True).stdout

    # Launched again, the newest run takes the exact name; the ended one gets a suffix.
    again = env.cli("launch", str(task), "-d")
    assert again.returncode == 0, again.stderr
    said = "took the name 'my-task'; the ended run that had it is now 'my-task-1'"
    assert f"note: {said}" in again.stderr
    second = again.stdout.strip()
    wait_for(lambda: env.run_state(second) == "succeeded", what="the second run's end")
    quiet = env.cli("launch", str(task), "--name", "other", "--quiet", timeout=120)
    assert quiet.returncode == 0, quiet.stderr
    assert "succeeded" in quiet.stdout and "running" in quiet.stdout  # the stages
    assert "first" not in quiet.stdout and "job:" not in quiet.stdout  # only the stages
    names = {r["name"]: r["id"] for r in env.runs()}
    assert sorted(names) == ["my-task", "my-task-1", "other"]
    assert names["my-task-1"] == run["id"] and names["my-task"] == again.stdout.strip()

    own = env.cli("launch", "--cmd", "echo hi from cmd", timeout=120)
    assert own.returncode == 0 and "hi from cmd" in own.stdout, own.stdout + own.stderr


def test_a_budget_stopped_run_needs_a_larger_cap_and_hours_left(env: Env) -> None:
    from spotrun.cloud.base import Plan
    from spotrun.core.config import LaunchSpec
    from spotrun.core.runstates import RunState
    from spotrun.store.ledger import CostLine

    with Ledger(load_settings(env.home)) as ledger:
        spec = LaunchSpec(
            recipe="digits-fast", name="capped", max_cost_usd=1.0, max_hours=1e-6
        )  # used up at once
        run = ledger.create_run(spec, plan=Plan([], "none"))
        ledger.transition(run.id, RunState.STOPPED, "budget: $1.00 cap; stopping now")
        line = CostLine(run.id, "compute", 60.0, "instance-s", 1.0, "m", usd_exact=Fraction(1))
        ledger.replace_cost_lines(run.id, [line])
    spent = env.cli("resume", "capped", "--max-hours", "1")
    assert spent.returncode == 2, spent.stderr
    assert "has spent $1.00 of its $1.00 cap" in spent.stderr and "--max-cost" in spent.stderr
    hours = env.cli("resume", "capped", "--max-cost", "3")
    assert hours.returncode == 2 and "used up its --max-hours" in hours.stderr, hours.stderr
    assert "--max-hours 1" in hours.stderr
    assert [r["state"] for r in env.runs()] == ["stopped"]  # refused: nothing changed


def test_a_run_stops_at_its_max_hours_and_resume_gives_it_more(env: Env) -> None:
    # 0.01 h = 36 s: the controller begins the stop half-way (the stop margin is longer), so
    # the run is stopped while it trains, whatever the machine's load.
    args = ["-d", "--name", "timed", "--max-hours", "0.01", "--set", "epochs=5000"]
    launched = env.cli("launch", "digits-fast", *args)
    assert launched.returncode == 0, launched.stderr
    run_dir = env.home / "runs" / launched.stdout.strip()
    wait_for(lambda: env.run_state(run_dir.name) == "stopped", timeout=240, what="the stop")
    stopped = _run(env, "timed")
    (last,) = stopped["transitions"][-1:]
    assert last["to"] == "stopped" and "max-hours: its 36s cap is reached" in last["reason"]
    assert "spotrun resume timed --max-hours N" in last["reason"]
    assert [i["state"] for i in stopped["instances"]] == ["terminated"]

    # Its hours are used up: resume asks for more, then goes on with them.
    refused = env.cli("resume", "timed")
    assert refused.returncode == 2 and "used up its --max-hours" in refused.stderr
    target = (_metrics(run_dir)[-1]["epoch"] if _metrics(run_dir) else 0) + 1
    resumed = env.cli("resume", "timed", "--max-hours", "1", "--set", f"epochs={target}")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"epoch {target}/{target}" in resumed.stdout and "succeeded" in resumed.stdout
    assert _run(env, "timed")["state"] == "succeeded"


def test_a_failed_own_command_resumes_and_its_output_shows(env: Env, tmp_path: Path) -> None:
    fixed = tmp_path / "fixed"
    script = f"if [ -e {fixed} ]; then echo works now; else echo broken; exit 3; fi"
    failed = env.cli("launch", "--cmd", script, "--name", "flaky", timeout=120)
    assert failed.returncode == 1 and "broken" in failed.stdout, failed.stdout + failed.stderr
    assert _run(env, "flaky")["state"] == "failed"
    assert "--set" in env.cli("resume", "flaky", "--set", "epochs=2").stderr  # no recipe keys

    fixed.touch()
    resumed = env.cli("resume", "flaky", timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    lines = resumed.stdout.splitlines()
    assert "works now" in lines and "broken" not in lines, resumed.stdout  # only what is new
    run = _run(env, "flaky")
    assert run["state"] == "succeeded" and len(run["instances"]) == 2
