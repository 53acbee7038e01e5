"""The controller on an always-on host (`spotrun controller up --on ssh://`), in the lab.

The "laptop" is the test's SPOTRUN_HOME, with no AWS credentials at all; the host is a lab
host of its own (spotlab/always_on.py) whose SSH sessions carry the lab's endpoint and the lab
user's keys, as a machine with its own AWS configuration. A run and a sweep are launched
through the laptop's CLI, then no process of the laptop's side is left (checked in the process
table); meanwhile the run's instance gets a spot notice and is replaced, and ASHA stops the
hopeless trial. The laptop's CLI then sees both finished, with cost, and pulls the run's folder.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab import spot as spotlab
from spotlab.always_on import start_always_on_host, user_key
from spotlab.hosts import Host
from spotrun.remote_controller.connection import close_shared_connection
from spotrun.remote_controller.record import load_record
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

HOST_HOME = "/root/.spotrun"  # SPOTRUN_HOME on the controller host (controller up's default)
# Three epochs after the only rung (epoch 1; the next, 4, is the end) so that, at load too,
# the sweep's controller sees a trial at the rung while it still trains: ASHA stops only
# a trial that has not finished.
# An epoch of digits takes ~0.5 s: a trial must outlast ASHA's decision at epoch 1, which goes
# instance -> controller host -> sweep supervisor -> stop, on a loaded machine too (a trial that
# has trained its last epoch is never stopped). 4 epochs left it ~1.5 s, and a loaded fresh
# clone lost that race; 16 leave it ~7 s and more under load, which slows the epochs as well.
TRIAL = ["--set", "epochs=16", "--set", "threads=1"]
RUN_EPOCHS = 6  # the notice lands after the first: five more give the agent time to see it


def laptop_processes(home: Path) -> list[str]:
    """Processes of this machine's side (the test's own mount namespace; the lab's hosts have
    their own) that run with the laptop's SPOTRUN_HOME: spotrun commands, controllers,
    supervisors, the shared ssh connection."""
    ours = os.readlink("/proc/self/ns/mnt")
    needle = f"SPOTRUN_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if os.readlink(entry / "ns" / "mnt") != ours:
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:  # ended meanwhile, or a kernel thread
            continue
        if needle in environ:
            found.append(f"{entry.name}: {cmdline.decode(errors='replace')}")
    return found


def _host_row(host: Host, query: str, *args: str) -> tuple[object, ...] | None:
    """One row of the controller host's ledger, read from its file (no spotrun process)."""
    path = host.path(f"{HOST_HOME}/ledger.db")
    if not path.exists():
        return None
    with sqlite3.connect(path, timeout=30) as db:
        row = db.execute(query, args).fetchone()
    return tuple(row) if row is not None else None


def _host_metrics_epoch(host: Host, lab: Lab, run_id: str, instance_id: str) -> int:
    try:
        lines = (
            lab.hosts.of(instance_id)
            .path(f"/root/.spotrun/runs/{run_id}/metrics.jsonl")
            .read_text()
        ).splitlines()
    except (KeyError, FileNotFoundError):
        return 0
    return int(json.loads(lines[-1])["epoch"]) if lines else 0


@pytest.fixture
def laptop(env: Env, lab: Lab, tmp_path: Path) -> Iterator[tuple[Env, Host, Path]]:
    """The laptop (no AWS variables, the lab's config) and the always-on host."""
    env.vars = {k: v for k, v in env.vars.items() if not k.startswith("AWS_")}
    lab.config.write_config(env.home, **spotlab.FAST)
    key = tmp_path / "laptop_key"
    host = start_always_on_host(lab, user_key(key), lab.root / "always-on")
    try:
        yield env, host, key
    finally:
        record = load_record(env.home)
        if record is not None:
            close_shared_connection(env.home, record)
        host.stop()  # the controller and everything else on the host dies with it


def test_a_run_and_a_sweep_finish_on_the_controller_host_while_the_laptop_is_away(
    laptop: tuple[Env, Host, Path], lab: Lab
) -> None:
    env, host, key = laptop
    url = f"ssh://root@{host.address}:{host.spec.port}"
    up = env.cli(
        "controller", "up", "--on", url, "--key", str(key), "--python", sys.executable,
        check=True, timeout=300,
    )  # fmt: skip
    assert "none were copied" in up.stdout and (env.home / "remote.json").exists()
    assert (
        host.path(f"{HOST_HOME}/config.toml").read_text() == (env.home / "config.toml").read_text()
    )
    refused = env.cli("plot", "anything")  # reads run folders here: refused, saying why
    assert refused.returncode == 2 and "spotrun pull" in refused.stderr, refused.stderr

    launch = ["launch", "digits-fast", "--cloud", "aws", "-d"]
    for item in spotlab.OVERRIDES:
        launch += ["--set", item if not item.startswith("epochs=") else f"epochs={RUN_EPOCHS}"]
    run_id = env.cli(*launch, check=True, timeout=300).stdout.strip()
    # lr=0.0005 learns nothing in an epoch: with two trials ahead of it at the first rung,
    # ASHA (grace 1 epoch, only the best so far at the rung goes on) stops it there; of the
    # other two, the first at the rung goes on and the second only if it is better
    sweep_id = env.cli(
        "sweep", "digits-fast", "--cloud", "aws", "--grid", "lr=0.2,0.15,0.0005", *TRIAL,
        "--early-stop", "asha", "--grace-epochs", "1", "--reduction-factor", "4",
        "--max-parallel", "2", "--name", "away", "-d",
        check=True, timeout=300,
    ).stdout.strip()  # fmt: skip

    # The laptop closes: nothing of its side runs from here on.
    close_shared_connection(env.home, load_record(env.home))  # type: ignore[arg-type]
    wait_for(lambda: not laptop_processes(env.home), 30, "the laptop's side to be gone")

    def one_instance() -> str | None:
        live = lab.instances(run_id, states=("running",))
        return live[0]["InstanceId"] if len(live) == 1 else None

    # once a second: each look asks the lab's EC2; the first epoch is waited for next anyway
    first = wait_for(one_instance, 180, "the run's instance", interval=1.0)
    wait_for(lambda: _host_metrics_epoch(host, lab, run_id, first) >= 1, 240, "a first epoch")
    # a spot notice, EC2 reclaims it after
    lab.interruptions.interrupt(first, notice_s=spotlab.NOTICE_S)
    wait_for(
        lambda: (
            _host_row(host, "SELECT state FROM runs WHERE id = ?", run_id)
            in (("succeeded",), ("failed",))
        ),
        600,
        "the run to end on the controller host",
    )
    wait_for(
        lambda: (
            _host_row(host, "SELECT state FROM sweeps WHERE id = ?", sweep_id)
            not in (None, ("running",))
        ),
        600,
        "the sweep to end on the controller host",
    )
    assert laptop_processes(env.home) == []  # it all happened with the laptop away

    # The laptop is back: its CLI sees both finished, with cost.
    (run,) = [r for r in env.runs() if r["id"] == run_id]
    assert run["state"] == "succeeded" and run["cost_usd"] > 0, run
    status = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    assert len(status["instances"]) == 2, status["instances"]  # replaced after the notice
    assert int(run["metrics"]["epoch"]) == RUN_EPOCHS
    board = json.loads(env.cli("sweep", "status", "away", "--json", check=True).stdout)
    assert board["state"] == "completed", board
    by_lr = {row["params"]["lr"]: row for row in board["leaderboard"]}
    assert by_lr["0.0005"]["status"] == "pruned" and "ASHA" in by_lr["0.0005"]["reason"]
    # The first of the two good trials to reach the rung always goes on (it is the best so
    # far there); the second goes on only if it beats it, which the noise of one epoch decides.
    good = [by_lr["0.2"], by_lr["0.15"]]
    assert any(row["status"] == "succeeded" for row in good), good
    assert all(
        row["status"] == "succeeded" or (row["status"] == "pruned" and "ASHA" in row["reason"])
        for row in good
    ), good
    costs = {row["id"]: row for row in json.loads(env.cli("cost", "--json", check=True).stdout)}
    # billed for both instances (the report rounds USD to the cent: seconds say more here)
    assert costs[run_id]["instance_seconds"] > 0 and costs[run_id]["state"] == "succeeded"
    trials = [row for row in costs.values() if row["sweep_id"] == sweep_id]
    assert len(trials) == 3 and all(row["instance_seconds"] > 0 for row in trials), trials

    # `spotrun pull` brings the run's folder here, and a second pull moves nothing.
    pulled = env.cli("pull", run_id, check=True, timeout=300)
    folder = env.home / "runs" / run_id
    assert str(folder) in pulled.stdout, pulled.stdout
    metrics = (folder / "metrics.jsonl").read_text().splitlines()
    assert len(metrics) == RUN_EPOCHS
    assert list((folder / "checkpoints").glob("ckpt-*.pt")) and (folder / "job.log").exists()
    again = env.cli("pull", run_id, check=True, timeout=300)
    assert ": 0 files (0.0 MB) brought" in again.stdout, again.stdout

    there = json.loads(env.cli("controller", "status", "--json", check=True).stdout)
    assert there["reachable"] and there["live_runs"] == [] and there["live_sweeps"] == []
    assert there["version_there"] == there["version_here"]
    env.cli("controller", "down", check=True, timeout=300)
    assert not (env.home / "remote.json").exists()


def test_files_travel_bad_hosts_are_refused_and_exit_codes_come_back(
    laptop: tuple[Env, Host, Path], tmp_path: Path
) -> None:
    """The quick half, on the host's local cloud (no EC2): a python without spotrun's
    dependencies is refused by name; a task file and a workdir of the laptop travel to the
    host; what cannot travel is refused; exit codes come back; `controller down` is refused
    while a run is live and --force stops it; a changed host key is refused."""
    env, host, key = laptop
    url = f"ssh://root@{host.address}:{host.spec.port}"
    bare = host.tmp / "bare"  # a python with nothing installed: /tmp/bare on the host
    venv = [sys.executable, "-m", "venv", "--without-pip", str(bare)]
    subprocess.run(venv, check=True, capture_output=True, timeout=120)
    up = ["controller", "up", "--on", url, "--key", str(key), "--python"]
    lacking = env.cli(*up, "/tmp/bare/bin/python", timeout=300)
    assert lacking.returncode == 2 and "lacks spotrun's dependencies: boto3" in lacking.stderr
    assert "/tmp/bare/bin/python -m pip install boto3" in lacking.stderr, lacking.stderr
    assert not (env.home / "remote.json").exists()
    env.cli(*up, sys.executable, check=True, timeout=300)

    work = tmp_path / "work"
    work.mkdir()
    (work / "data.txt").write_text("made on the laptop\n")
    (work / "skip.log").write_text("ignored\n")
    (work / ".gitignore").write_text("*.log\n")
    task = tmp_path / "task.yaml"
    task.write_text("name: from-task\nworkdir: work\nrun: cat data.txt; ls\n")
    by_task = env.cli("launch", str(task), "--cloud", "local", timeout=300)
    assert by_task.returncode == 0, by_task.stdout + by_task.stderr
    assert "made on the laptop" in by_task.stdout and "skip.log" not in by_task.stdout
    assert "made on the laptop" in env.cli("logs", "from-task", check=True).stdout
    tab = {
        **env.vars,
        "_SPOTRUN_COMPLETE": "complete_fish",
        "_TYPER_COMPLETE_ARGS": "spotrun logs fr",
    }
    tab["_TYPER_COMPLETE_FISH_ACTION"] = "get-args"
    names = subprocess.run(
        [sys.executable, "-m", "spotrun"], env=tab, capture_output=True, text=True, timeout=120
    )
    assert names.stdout.strip() == "from-task\tsucceeded", names  # the host's run names
    # The job's environment of the laptop travels too: an --env-file, and a tracker's
    # variable of the laptop's shell (the host's shell does not have it), as 0600 files.
    env_file = tmp_path / "job.env"
    env_file.write_text("# for the job\nNOTE=from the file\n")
    env.vars["MLFLOW_EXPERIMENT_NAME"] = "from-laptop"
    by_flag = env.cli(
        "launch", "--cmd", 'cat data.txt; echo "exp=$MLFLOW_EXPERIMENT_NAME note=$NOTE"; exit 3',
        "--workdir", str(work), "--env-file", str(env_file), "--cloud", "local",
        timeout=300,
    )  # fmt: skip
    del env.vars["MLFLOW_EXPERIMENT_NAME"]
    assert by_flag.returncode == 1 and "made on the laptop" in by_flag.stdout  # the run failed
    assert "exp=from-laptop note=from the file" in by_flag.stdout, by_flag.stdout
    assert "carrying MLFLOW_EXPERIMENT_NAME into the job's environment" in by_flag.stderr
    staged = [p for p in host.path(f"{HOST_HOME}/staging").rglob("*") if p.is_file()]
    env_files = [p for p in staged if p.name == "trackers.env" or p.name.startswith("env-")]
    assert len(env_files) == 2 and all(p.stat().st_mode & 0o077 == 0 for p in env_files), staged
    missing = env.cli("status", "no-such-run")
    assert missing.returncode == 2 and "error:" in missing.stderr  # the host's own answer
    local_data = env.cli("launch", "digits-fast", "--set", f"data={work}")
    assert local_data.returncode == 2 and "spotrun data push" in local_data.stderr

    # `controller down` is refused while a run is live; --force stops it first, then the
    # controller lives on this machine again
    live = env.cli("launch", "--cmd", "sleep 600", "--cloud", "local", "--name", "long", "-d")
    assert live.returncode == 0, live.stderr
    before = json.loads(env.cli("controller", "status", "--json", check=True).stdout)["pid"]
    host.path(f"{HOST_HOME}/code").rename(host.path(f"{HOST_HOME}/old-code"))  # as if newer
    again = env.cli(*up, sys.executable, check=True, timeout=300)  # pushes, and restarts it
    assert f"restarted the controller there (was pid {before})" in again.stdout, again.stdout
    after = json.loads(env.cli("controller", "status", "--json", check=True).stdout)
    assert after["pid"] not in (None, before), (before, after)  # a new one drives the run
    assert [live.split(" ")[0] for live in after["live_runs"]] == ["long"], after
    refused = env.cli("controller", "down", timeout=300)
    assert refused.returncode != 0 and "live: long (" in refused.stderr, refused.stderr
    forced = env.cli("controller", "down", "--force", check=True, timeout=300)
    assert "stopped long" in forced.stdout and not (env.home / "remote.json").exists()
    assert not host.path(f"{HOST_HOME}/staging").exists()  # the staged workdirs went too
    stopped = _host_row(host, "SELECT state FROM runs WHERE name = ?", "long")
    assert stopped == ("stopped",), stopped
    assert "no runs yet" in env.cli("ls", check=True).stdout  # this machine's own ledger
    env.cli(*up, sys.executable, check=True, timeout=300)

    host.restart(new_host_key=True)  # another machine answers at the address
    changed = env.cli("ls")
    assert changed.returncode == 255 and "REMOTE HOST IDENTIFICATION HAS CHANGED" in changed.stderr
    status = json.loads(env.cli("controller", "status", "--json").stdout)
    assert not status["reachable"] and "host key" in status["problem"], status
