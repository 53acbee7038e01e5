"""Your own command, end to end: the lab (moto's EC2 + an sshd host per instance, tmux on the
host) and the local cloud run the same task file, with the real CLI and supervisors."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spotlab import Lab
from spotlab.fixtures import lab_root, use_lab
from spotrun.core.config import load_settings
from spotrun.drive.supervisor import is_supervised
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

# A training script in miniature: resumes from SPOTRUN_CHECKPOINT_DIR, writes outputs, exits 75
# once when asked (spotrun starts it again), saves on SIGTERM, and waits for `exec` to say go.
JOB = """\
import json, os, signal, sys, time
from pathlib import Path

ck = Path(os.environ["SPOTRUN_CHECKPOINT_DIR"])
state = ck / "state.json"
attempt = (json.loads(state.read_text())["attempt"] if state.exists() else 0) + 1
state.write_text(json.dumps({"attempt": attempt}))
keys = ["SPOTRUN_RUN_ID", "SPOTRUN_CHECKPOINT_DIR", "SPOTRUN_NUM_GPUS", "MASTER_ADDR",
        "MASTER_PORT", "NODE_RANK", "NNODES", "GREETING"]
info = {k: os.environ.get(k) for k in keys}
info["setup_ran"] = Path("setup-done").exists()
info["shipped"] = sorted(str(p) for p in Path(".").rglob("*") if p.is_file())
Path("results").mkdir(exist_ok=True)
Path(f"results/attempt-{attempt}.json").write_text(json.dumps(info))
print(f"attempt {attempt}", flush=True)
if attempt == 1 and os.environ.get("RESTART_ONCE"):
    sys.exit(75)

def on_term(signum, frame):
    (ck / "sigterm.json").write_text(json.dumps({"attempt": attempt, "signal": signum}))
    print("saved on SIGTERM", flush=True)
    sys.exit(0)

signal.signal(signal.SIGTERM, on_term)
while not Path("go").exists():
    time.sleep(0.1)
Path("results/done.txt").write_text(f"done after {attempt} attempt(s)")
print("done", flush=True)
"""


def make_project(root: Path, *, setup: str = "echo preparing; echo ok > setup-done") -> Path:
    """A workdir with a .gitignore, and a task file beside it; returns the task file."""
    proj = root / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / "job.py").write_text(JOB)
    (proj / ".gitignore").write_text("data/\n*.log\n")
    (proj / "data" / "big.bin").write_bytes(b"\0" * 1000)
    (proj / "notes.log").write_text("not shipped")
    task = root / "task.yaml"
    task.write_text(
        "name: own-e2e\n"
        "resources: {gpus: 0}\n"
        "workdir: proj\n"
        f"setup: {json.dumps(setup)}\n"
        # two commands: bash stays the job's parent, and SIGTERM must still reach python
        'run: "$PY job.py && echo finished"\n'
        f"envs: {{PY: {json.dumps(sys.executable)}, GREETING: hello}}\n"
        "outputs: [results]\n"
        "checkpoint_dir: ckpt\n"
        "max_hours: 1\n"
    )
    return task


@pytest.fixture(scope="module")
def shared_lab() -> Iterator[Lab]:
    """One lab for the module's tests (each run has its own instances, found by run id)."""
    root = lab_root()
    started = Lab(root).start()
    try:
        yield started
    finally:
        started.close()
        shutil.rmtree(root, ignore_errors=True)
    assert not started.errors, f"the lab's watcher failed: {started.errors}"


@pytest.fixture
def lab_env(env: Env, shared_lab: Lab) -> Iterator[Env]:
    with use_lab(env, shared_lab):
        yield env


def _run(env: Env, run_id: str) -> dict[str, Any]:
    return json.loads(env.cli("status", run_id, "--json", check=True).stdout)


def _ended(env: Env, run_id: str) -> dict[str, Any]:
    try:
        wait_for(
            lambda: env.run_state(run_id) in ("succeeded", "failed", "stopped"),
            timeout=90,
            what=f"run {run_id} to end",
        )
    except AssertionError as exc:
        log = env.home / "runs" / run_id / "supervisor.log"
        tail = log.read_text()[-3000:] if log.exists() else ""
        raise AssertionError(f"{exc}\n{_run(env, run_id)}\n{tail}") from None
    return _run(env, run_id)


def _results(env: Env, run_id: str, name: str) -> dict[str, Any] | None:
    path = env.home / "runs" / run_id / "workdir" / "results" / name
    return json.loads(path.read_text()) if path.exists() else None


def _launch(env: Env, task: Path, *extra: str) -> str:
    return env.cli("launch", str(task), "-d", *extra, check=True).stdout.strip()


def _supervised(env: Env, run_id: str) -> bool:
    with Ledger(load_settings(env.home)) as ledger:
        return is_supervised(ledger.get_run(run_id))


def _check_success(env: Env, run_id: str, *, last: int) -> None:
    """The attempts' outputs came back, with the job's environment and what was shipped."""
    run_dir = env.home / "runs" / run_id
    first = _results(env, run_id, "attempt-1.json")
    assert first is not None
    assert first["SPOTRUN_RUN_ID"] == run_id and first["GREETING"] == "hello"
    assert first["SPOTRUN_NUM_GPUS"] == "0" and first["SPOTRUN_CHECKPOINT_DIR"].endswith(
        "/workdir/ckpt"
    )
    assert (first["MASTER_ADDR"], first["NODE_RANK"], first["NNODES"]) == ("127.0.0.1", "0", "1")
    assert first["MASTER_PORT"].isdigit() and first["setup_ran"] is True
    assert ".gitignore" in first["shipped"] and "job.py" in first["shipped"]
    assert not any(p.startswith("data") or p.endswith(".log") for p in first["shipped"])
    assert (run_dir / "workdir" / "results" / "done.txt").read_text() == (
        f"done after {last} attempt(s)"
    )
    # The checkpoint came back through the run folder (checkpoint_dir links into it).
    assert json.loads((run_dir / "checkpoints" / "state.json").read_text()) == {"attempt": last}
    setup_log = (run_dir / "setup.log").read_text()
    assert setup_log.count("preparing") == 1  # once per instance, also across the restart
    log = (run_dir / "job.log").read_text()
    assert f"attempt {last}" in log and "finished" in log


def test_task_in_the_lab_outputs_checkpoint_restart_exec_and_sigterm(
    lab_env: Env, shared_lab: Lab, tmp_path: Path
) -> None:
    env, lab = lab_env, shared_lab
    task = make_project(tmp_path)
    # Two runs side by side: one restarts once (exit 75), moves to a replacement instance and
    # is released by `exec`; the other is stopped, and its script saves on the SIGTERM it gets.
    main = _launch(env, task, "--cloud", "aws", "--env", "RESTART_ONCE=1")
    stopped = _launch(env, task, "--cloud", "aws", "--name", "to-stop")

    # Outputs and checkpoints come back while the job runs, not only at the end.
    wait_for(lambda: _results(env, main, "attempt-2.json"), timeout=90, what="the restart")
    assert env.run_state(main) == "running"
    (item,) = lab.instances(main)  # the restart reused the same instance
    assert item["State"]["Name"] == "running"
    second = _results(env, main, "attempt-2.json")
    assert second is not None and second["setup_ran"] is True

    failing = env.cli("exec", main, "--cmd", "echo checking; exit 3")
    assert failing.returncode == 3 and failing.stdout == "checking\n", failing

    # A spot notice: the script's process gets SIGTERM and saves; the replacement runs the
    # same command on a fresh instance, its setup run there, its checkpoint put back first.
    # 15 s of notice (EC2 gives 120): at load the agent needs a few seconds to see it, stop
    # the script and store what it saved before EC2 takes the instance.
    lab.interruptions.interrupt(item["InstanceId"], notice_s=15.0)
    wait_for(lambda: _results(env, main, "attempt-3.json"), timeout=90, what="the replacement")
    third = _results(env, main, "attempt-3.json")
    assert third is not None and third["setup_ran"] is True
    # what the script saved at the notice comes back with the replacement's next sync (the
    # results folder may come first: wait for the file itself)
    saved_at_notice = env.home / "runs" / main / "checkpoints" / "sigterm.json"
    wait_for(saved_at_notice.exists, timeout=120, what="the notice's sigterm.json synced back")
    assert json.loads(saved_at_notice.read_text()) == {"attempt": 2, "signal": 15}
    replacement = [i for i in lab.instances(main) if i["InstanceId"] != item["InstanceId"]]
    assert [i["State"]["Name"] for i in replacement] == ["running"]

    done = env.cli("exec", main, "--cmd", 'echo "exec in $SPOTRUN_RUN_ID at $PWD"; touch go')
    assert done.returncode == 0, done.stderr
    assert f"exec in {main} at /root/.spotrun/runs/{main}/workdir" in done.stdout
    run = _ended(env, main)
    assert run["state"] == "succeeded", (run["message"], run["events"])
    _check_success(env, main, last=3)
    # state.json and the sigterm.json saved at the notice
    assert "2 checkpoint file(s) restored on " + replacement[0]["InstanceId"] in " ".join(
        e["message"] for e in run["events"]
    )
    events = " ".join(e["message"] for e in run["events"])
    assert "workdir pushed: 2 new or changed file(s)" in events, events
    assert "workdir unchanged on the instance" in events, events  # the restart pushed nothing
    assert {i["State"]["Name"] for i in lab.instances(main)} == {"terminated"}

    wait_for(lambda: _results(env, stopped, "attempt-1.json"), timeout=60, what="the job to run")
    env.cli("stop", "to-stop", check=True)
    run = _run(env, stopped)
    assert run["state"] == "stopped"
    saved = env.home / "runs" / stopped / "checkpoints" / "sigterm.json"
    assert json.loads(saved.read_text()) == {"attempt": 1, "signal": 15}
    assert "saved on SIGTERM" in (env.home / "runs" / stopped / "job.log").read_text()


def test_failing_setup_and_failing_run_in_the_lab(
    lab_env: Env, shared_lab: Lab, tmp_path: Path
) -> None:
    env, lab = lab_env, shared_lab
    bad_setup = make_project(
        tmp_path / "a", setup="echo fetching deps; echo 'ERROR: no such package torchh' >&2; false"
    )
    setup_run = _launch(env, bad_setup, "--cloud", "aws")
    run_run = env.cli(
        "launch",
        "--cmd",
        "echo about to fail; echo 'bad input line 7' >&2; exit 3",
        "--cloud",
        "aws",
        "-d",
        check=True,
    ).stdout.strip()

    run = _ended(env, setup_run)
    assert run["state"] == "failed"
    assert run["message"].startswith("setup failed with exit code 1: "), run["message"]
    assert "ERROR: no such package torchh" in run["message"]
    assert not (env.home / "runs" / setup_run / "workdir" / "results").exists()  # never ran

    run = _ended(env, run_run)
    assert run["state"] == "failed"
    assert run["message"] == "job exited with code 3: about to fail | bad input line 7"
    for run_id in (setup_run, run_run):
        assert [i["State"]["Name"] for i in lab.instances(run_id)] == ["terminated"]


def test_bad_input_launches_nothing(lab_env: Env, shared_lab: Lab, tmp_path: Path) -> None:
    env, lab = lab_env, shared_lab
    task = make_project(tmp_path)
    (tmp_path / "proj" / "weights.bin").write_bytes(b"\0" * 300_000)
    (env.home / "config.toml").write_text(
        (env.home / "config.toml").read_text().replace("[aws]", "workdir_max_mb = 0.2\n\n[aws]", 1)
    )
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("run: x\nsetpu: y\n")
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("run: x\nresources: {gpus: two}\n")
    cases = [
        (["--cmd", "x", "--workdir", str(tmp_path / "nope")], "does not exist"),
        ([str(task)], "over the 200.0 kB limit; biggest: weights.bin 300.0 kB"),
        ([str(unknown)], "unknown key 'setpu'"),
        ([str(wrong)], "resources.gpus"),
        (["--cmd", " "], "the run command is empty"),
        (["--cmd", "x", "--env", "NOEQUALS"], "--env 'NOEQUALS'"),
        (["digits-fast", "--setup", "x"], "only with --cmd or a task file"),
    ]
    before = {i["InstanceId"] for i in lab.instances()}
    for n, (args, fragment) in enumerate(cases):
        cloud = "local" if n % 3 == 2 else "aws"  # the checks come before the cloud is asked
        proc = env.cli("launch", *args, "--cloud", cloud, "-d")
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert fragment in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert {i["InstanceId"] for i in lab.instances()} == before  # EC2 made nothing
    assert not (env.home / "runs").exists() or not any((env.home / "runs").iterdir())
    assert env.runs() == []


def test_the_same_task_on_the_local_cloud(env: Env, tmp_path: Path) -> None:
    task = make_project(tmp_path)
    run_id = _launch(env, task, "--cloud", "local", "--env", "RESTART_ONCE=1")
    wait_for(lambda: _results(env, run_id, "attempt-2.json"), timeout=60, what="the restart")
    done = env.cli("exec", run_id, "--cmd", "touch go; echo released")
    assert done.returncode == 0 and "released" in done.stdout, (done.stdout, done.stderr)
    run = _ended(env, run_id)
    assert run["state"] == "succeeded", (run["message"], run["events"])
    _check_success(env, run_id, last=2)
    assert not (tmp_path / "proj" / "results").exists()  # it ran on a copy, not in your folder
