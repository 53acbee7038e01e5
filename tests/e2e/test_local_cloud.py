"""The walking skeleton end to end on the local cloud: real CLI, real tmux, real torch."""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path

import pytest

from spotrun.train.device import PrecisionProbe, cpu_capabilities
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

LONG = ["--set", "epochs=400"]  # minutes of training: long enough to look at, stop, attach


def _run(env: Env, ref: str) -> dict:
    return next(r for r in env.runs() if r["id"] == ref or r["name"] == ref)


def _epochs(run_dir: Path) -> int:
    """The newest evaluated epoch in the run's metrics.jsonl (0: none yet)."""
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return 0
    return int(json.loads(lines[-1])["epoch"]) if lines else 0


def test_launch_digits_fast_end_to_end(env: Env) -> None:
    # How long this takes is measured by bench/local_launch.py, not asserted here.
    # precision=auto: the trainer decides from this machine's CPU and says so (device.json)
    auto = ("--set", 'methods.mixed_precision={"precision": "auto"}')
    proc = env.cli("launch", "digits-fast", *auto, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "succeeded" in proc.stdout

    (run,) = env.runs()
    assert run["state"] == "succeeded"
    assert run["recipe"] == "digits-fast" and run["cloud"] == "local"
    for key in ("id", "name", "started", "duration_s", "cost_usd", "metrics"):
        assert key in run
    assert run["metrics"]["test_acc"] >= 0.97  # the recipe's stated target
    assert run["cost_usd"] == 0.0

    run_dir = env.home / "runs" / run["id"]
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 12
    for line in lines:
        assert {"step", "epoch", "elapsed_s", "train_loss", "test_acc"} <= set(line)
    assert list(run_dir.glob("checkpoints/ckpt-*.pt"))
    assert json.loads((run_dir / "recipe.json").read_text())["name"] == "digits-fast"
    assert (run_dir / "exit.json").exists()
    assert f"spotrun-{run['id']}" not in env.sessions()

    status = json.loads(env.cli("status", run["name"], "--json", check=True).stdout)
    states = [t["to"] for t in status["transitions"]]
    assert states == [
        "planned",
        "requested",
        "provisioning",
        "bootstrapping",
        "running",
        "syncing",
        "succeeded",
    ]
    (instance,) = status["instances"]
    assert instance["state"] == "terminated" and instance["terminated_at"] > instance["launched_at"]
    # what auto chose on this CPU, from its real flags (and, where the CPU has bf16
    # instructions, from timing both precisions here): in status, its events and the job log
    native = bool(cpu_capabilities().cpu_bf16)
    device = status["device"]
    (precision,) = [c for c in device["choices"] if c["method"] == "mixed_precision"]
    probe = PrecisionProbe.from_dict(device["probe"])
    if native:
        assert probe is not None, device  # timed, not guessed
        assert probe.line() in precision["reason"]
        expected = "bf16" if probe.bf16_wins else "fp32"
    else:
        assert probe is None, device  # nothing to time: bf16 would be emulated
        expected = "fp32"
    assert (precision["asked"], precision["use"]) == ("auto", expected)
    assert device["capabilities"]["kind"] == "cpu"
    assert [e["message"] for e in status["events"] if e["kind"] == "device"] == [device["line"]]
    assert f"device    {device['line']}" in env.cli("status", run["name"], check=True).stdout
    assert f"device {device['line']}" in (run_dir / "job.log").read_text()
    (line,) = status["cost_lines"]
    assert line["usd"] == 0.0 and line["unit"] == "instance-s" and line["quantity"] > 1.0

    cost = json.loads(env.cli("cost", run["id"][:5], "--json", check=True).stdout)
    assert cost[0]["cost_usd"] == 0.0 and cost[0]["instance_seconds"] > 1.0


def test_detached_run_ls_logs_stop(env: Env) -> None:
    proc = env.cli("launch", "digits-fast", "--detach", "--name", "long-one", *LONG)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    assert len(run_id) == 12

    wait_for(lambda: env.run_state(run_id) == "running", what="run to be running")
    assert f"spotrun-{run_id}" in env.sessions()
    wait_for(lambda: _epochs(env.home / "runs" / run_id) >= 2, timeout=180, what="two epochs")
    # ls lists it by name, running, with the epochs it has evaluated (once its controller has
    # reported them: asked once a second, not at the file's pace)
    listed = wait_for(
        lambda: [
            r for r in env.runs() if r["name"] == "long-one" and r["metrics"].get("epoch", 0) >= 2
        ],
        timeout=60,
        what="ls to show two epochs",
        interval=1.0,
    )
    assert [(r["id"], r["state"]) for r in listed] == [(run_id, "running")], listed

    follower = env.popen("logs", "-f", "long-one")
    # It follows once it has printed the log so far: stop the run only then. (One reader for
    # all of its output: communicate() would miss what a readline() had buffered.)
    stream = follower.stdout
    assert stream is not None
    lines: list[str] = []
    printed = threading.Event()

    def read() -> None:
        for line in stream:
            lines.append(line)
            printed.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert printed.wait(timeout=120), "logs -f printed nothing"
    stopped = env.cli("stop", run_id[:6])
    assert stopped.returncode == 0, stopped.stderr
    follower.wait(timeout=60)  # -f returns by itself once the run has ended
    reader.join(timeout=60)
    out = "".join(lines)
    assert "training digits-fast" in out and "epoch 1/400" in out

    run = _run(env, run_id)
    assert run["state"] == "stopped"
    assert f"spotrun-{run_id}" not in env.sessions()
    ckpt_dir = env.home / "runs" / run_id / "checkpoints"
    assert list(ckpt_dir.glob("ckpt-*.pt")), "stop lets the trainer checkpoint first"
    log = env.cli("logs", "long-one", check=True).stdout
    assert "stop requested by SIGTERM" in log


def test_attach_puts_a_terminal_in_the_session(env: Env) -> None:
    run_id = env.cli("launch", "digits-fast", "--detach", *LONG, check=True).stdout.strip()
    session = f"spotrun-{run_id}"
    wait_for(lambda: env.run_state(run_id) == "running", what="running")
    # A terminal of our own: a second tmux server whose pane runs `spotrun attach`.
    env.tmux(
        "-L",
        "outer",
        "new-session",
        "-d",
        "-x",
        "120",
        "-y",
        "40",
        f"{sys.executable} -m spotrun attach {run_id}; sleep 60",
    )
    try:
        clients = wait_for(
            lambda: env.tmux(
                "list-clients", "-t", f"={session}", "-F", "#{client_tty}"
            ).stdout.strip(),
            what="a client attached to the run's session",
        )
        assert clients
        wait_for(
            lambda: "epoch" in env.tmux("-L", "outer", "capture-pane", "-p").stdout,
            what="training output",
        )
    finally:
        env.tmux("-L", "outer", "kill-server")
        env.cli("stop", run_id)


def test_train_killed_mid_run_resumes_exactly(env: Env, tmp_path: Path) -> None:
    args = ["train", "digits-fast", "--set", "epochs=4", "--set", "checkpoint_every_steps=10"]
    reference = tmp_path / "reference"
    env.cli(*args, "--run-dir", str(reference), check=True)

    run_dir = tmp_path / "interrupted"
    proc = env.popen(*args, "--run-dir", str(run_dir))
    ckpts = run_dir / "checkpoints"
    wait_for(
        lambda: any(p.name >= "ckpt-000000030.pt" for p in ckpts.glob("ckpt-*.pt")),
        what="3 checkpoints",
    )
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert not (run_dir / "checkpoints" / "ckpt-000000092.pt").exists(), "killed before the end"

    resumed = env.cli(*args, "--run-dir", str(run_dir), check=True)
    assert "resumed at epoch" in resumed.stdout

    def metrics(d: Path) -> list[dict]:
        rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in rows]

    assert metrics(run_dir) == metrics(reference)  # bitwise: same floats, same lines, no repeats


def test_train_sigterm_checkpoints_and_exits_75(env: Env, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = env.popen("train", "digits-fast", "--run-dir", str(run_dir), "--set", "epochs=400")
    wait_for(lambda: (run_dir / "metrics.jsonl").exists(), what="first evaluation")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 75
    assert "checkpointed at step" in out
    assert list((run_dir / "checkpoints").glob("ckpt-*.pt"))


def test_failed_job_fails_the_run_with_its_last_lines(env: Env) -> None:
    # A learning rate that makes training diverge: valid input, a job that fails at run time.
    proc = env.cli("launch", "digits-fast", "--set", "lr=1e12", "--set", "epochs=3", timeout=120)
    assert proc.returncode == 1, proc.stdout
    (run,) = env.runs()
    assert run["state"] == "failed"
    assert "diverged" in run["message"]
    assert env.sessions() == []
