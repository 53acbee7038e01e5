"""Reaching a run's instance: `spotrun ssh`, the ssh config include spotrun keeps (real OpenSSH
client against the lab's real sshd hosts, host keys strictly checked), `attach` without a
terminal, and curves synced back from the instance."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from spotlab import Lab
from tests.conftest import REPO, Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

LONG = ["--set", "epochs=400", "--set", "threads=1"]  # runs until stopped


def _no_tty(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI with no terminal on its input (as from a script, a pipe or CI)."""
    return subprocess.run(
        [sys.executable, "-m", "spotrun", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env.vars,
        timeout=120,
    )


def _openssh(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", "-F", str(config), "-o", "BatchMode=yes", "-o", "ConnectTimeout=20", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _event_scalars(run_dir: Path) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if not list(run_dir.glob("events.out.tfevents.*")):
        return []
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars("test_acc")] if acc.Tags()["scalars"] else []


def test_ssh_config_spotrun_ssh_and_attach_without_terminal_on_aws(aws_env: Env, lab: Lab) -> None:
    env = aws_env
    run_id = env.cli(
        "launch", "digits-fast", "--cloud", "aws", "-d", "--name", "far", *LONG, check=True
    ).stdout.strip()
    wait_for(lambda: env.run_state(run_id) == "running", timeout=90, what="the job to start")
    session = f"spotrun-{run_id}"
    (item,) = lab.instances(run_id)
    instance_id = item["InstanceId"]

    # The include file: written by the supervisor as the run started running.
    config = env.home / "ssh_config"
    text = wait_for(
        lambda: (
            config.exists() and "Host spotrun-far\n" in config.read_text() and config.read_text()
        ),
        timeout=30,
        what="the run's entry in SPOTRUN_HOME/ssh_config",
    )
    assert f"HostName {item['PrivateIpAddress']}\n" in text
    assert "StrictHostKeyChecking yes" in text and "UserKnownHostsFile" in text
    assert "User root" in text and f"Port {lab.hosts.ssh_port}" in text

    # The user's own OpenSSH reaches the instance with it: the host's own tmux has the job.
    reached = _openssh(config, "spotrun-far", "true")
    assert reached.returncode == 0, reached.stderr
    listed = _openssh(config, "spotrun-far", "tmux", "ls")
    assert listed.returncode == 0 and session in listed.stdout, listed.stderr

    # The host key is pinned: a different key for that address is refused, not learned.
    known_hosts = env.home / "ssh" / run_id / f"known_hosts-{instance_id}"
    pinned = known_hosts.read_text()
    host_name, _kind, _key = pinned.split()
    other = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    known_hosts.write_text(f"{host_name} ssh-ed25519 {other}\n")
    refused = _openssh(config, "spotrun-far", "true")
    assert refused.returncode == 255 and "Host key verification failed" in refused.stderr

    # `spotrun ssh` writes the pin back and runs the command there.
    ran = _no_tty(env, "ssh", "far", "tmux", "ls")
    assert ran.returncode == 0, ran.stderr
    assert session in ran.stdout and "spotrun-far" in ran.stderr
    assert known_hosts.read_text() == pinned

    # attach without a terminal explains itself and names the session.
    attach = _no_tty(env, "attach", "far")
    assert attach.returncode == 2
    assert "attach needs a terminal" in attach.stderr and session in attach.stderr
    assert "open terminal failed" not in attach.stderr

    # Curves come back from the instance: TensorBoard reads the synced event files here.
    run_dir = env.home / "runs" / run_id
    points = wait_for(lambda: _event_scalars(run_dir), timeout=180, what="synced event files")
    assert points[0][0] > 0 and 0.0 <= points[0][1] <= 1.0

    stopped = env.cli("stop", "far", timeout=180)
    assert stopped.returncode == 0, stopped.stderr
    assert "spotrun-far" not in config.read_text()  # gone with the run
    gone = _no_tty(env, "ssh", "far", "true")
    assert gone.returncode != 0 and "ssh reaches a running run's instance" in gone.stderr


def test_ssh_and_attach_without_terminal_on_the_local_cloud(env: Env) -> None:
    run_id = env.cli("launch", "digits-fast", "-d", "--name", "near", *LONG, check=True)
    run_id_text = run_id.stdout.strip()
    wait_for(lambda: env.run_state(run_id_text) == "running", timeout=90, what="the job to start")
    try:
        attach = _no_tty(env, "attach", "near")
        assert attach.returncode == 2, attach.stderr
        session = f"spotrun-{run_id_text}"
        assert "attach needs a terminal" in attach.stderr and session in attach.stderr
        assert "on this machine" in attach.stderr and "logs near -f" in attach.stderr

        # the local cloud's instance is this machine: a shell in the run's folder
        shell = _no_tty(env, "ssh", "near", "pwd")
        assert shell.returncode == 0, shell.stderr
        run_dir = env.home / "runs" / run_id_text
        assert Path(shell.stdout.strip()).resolve() == run_dir.resolve()
        assert "local cloud" in shell.stderr
        assert "spotrun-near" not in (env.home / "ssh_config").read_text()
    finally:
        env.cli("stop", "near", timeout=180)


def test_ssh_and_attach_in_a_terminal_on_the_local_cloud(env: Env) -> None:
    """In a real terminal (a tmux pane): `spotrun ssh RUN` is an interactive shell in the
    run's folder, and `spotrun attach RUN` puts the pane into the job's tmux session until
    Ctrl-b d detaches it."""
    run_id = env.cli("launch", "digits-fast", "-d", "--name", "here", *LONG, check=True)
    run_id_text = run_id.stdout.strip()
    session = f"spotrun-{run_id_text}"
    run_dir = (env.home / "runs" / run_id_text).resolve()
    wait_for(lambda: env.run_state(run_id_text) == "running", timeout=90, what="the job to start")
    names = ("SPOTRUN_HOME", "TMUX_TMPDIR", "PYTHONPATH")
    exports = " ".join(f"{k}={shlex.quote(env.vars[k])}" for k in names)
    spotrun = (
        f"cd {shlex.quote(str(REPO))} && env {exports} {shlex.quote(sys.executable)} -m spotrun"
    )

    def pane() -> str:
        return env.tmux("-L", "term", "capture-pane", "-p", "-J", "-t", "term").stdout

    def clients() -> list[str]:
        listed = env.tmux("list-clients", "-t", f"={session}", "-F", "#{client_tty}")
        return listed.stdout.split() if listed.returncode == 0 else []

    started = env.tmux("-L", "term", "new-session", "-d", "-s", "term", "-x", "220", "-y", "50")
    assert started.returncode == 0, started.stderr
    try:
        env.tmux("-L", "term", "send-keys", "-t", "term", f"{spotrun} ssh here", "Enter")
        wait_for(lambda: "a shell in its folder" in pane(), timeout=60, what="the shell's note")
        env.tmux("-L", "term", "send-keys", "-t", "term", 'echo "in:$(pwd -P)"', "Enter")
        wait_for(lambda: f"in:{run_dir}" in pane(), timeout=60, what="the shell in the run folder")
        env.tmux("-L", "term", "send-keys", "-t", "term", "exit", "Enter")

        assert clients() == []
        env.tmux("-L", "term", "send-keys", "-t", "term", f"{spotrun} attach here", "Enter")
        wait_for(clients, timeout=60, what="the pane attached to the job's session")
        env.tmux("-L", "term", "send-keys", "-t", "term", "C-b", "d")
        wait_for(
            lambda: f"[detached (from session {session})]" in pane(),
            timeout=60,
            what="the detach",
        )
        assert clients() == [] and env.run_state(run_id_text) == "running"  # the job goes on
    finally:
        env.tmux("-L", "term", "kill-server")
        env.cli("stop", "here", timeout=180)
