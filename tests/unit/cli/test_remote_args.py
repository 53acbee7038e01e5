"""The remote controller's pure parts: the --on address, remote.json, which commands go to
the host and which are refused there, and how launch's arguments are split for staging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.errors import UsageError
from spotrun.core.runstates import RunState
from spotrun.remote_controller.forward import _split, refusal, wants_forwarding
from spotrun.remote_controller.record import (
    ControllerHost,
    load_record,
    parse_ssh_url,
    record_path,
    save_record,
)
from spotrun.store.ledger import Ledger
from tests.conftest import Env


def test_ssh_urls() -> None:
    target = parse_ssh_url("ssh://me@box.example.org:2222")
    assert (target.user, target.host, target.port) == ("me", "box.example.org", 2222)
    assert parse_ssh_url("ssh://10.0.0.5").url() == "ssh://10.0.0.5"
    for bad in (
        "box",
        "ssh://",
        "ssh://a b",
        "ssh://-oProxyCommand=x",
        "ssh://h:99999",
        "http://h",
    ):
        with pytest.raises(UsageError):
            parse_ssh_url(bad)


def test_the_record_round_trips_atomically_and_a_damaged_one_says_what_to_do(
    tmp_path: Path,
) -> None:
    assert load_record(tmp_path) is None
    record = ControllerHost("me", "h", 22, None, "python3", "/home/me/.spotrun", "/c", "v", 1.0)
    save_record(tmp_path, record)
    assert load_record(tmp_path) == record
    assert [p.name for p in tmp_path.iterdir()] == ["remote.json"]  # no temp file left
    record_path(tmp_path).write_text("{not json")
    with pytest.raises(UsageError, match="controller up"):
        load_record(tmp_path)


def test_the_host_line_quotes_every_argument() -> None:
    record = ControllerHost(None, "h", 22, None, "/opt/py 3/python", "/h/.spotrun", "/c", "v", 0)
    line = record.spotrun_command(["launch", "--cmd", "echo $HOME; rm -rf /"])
    assert "'echo $HOME; rm -rf /'" in line and "'/opt/py 3/python' -m spotrun" in line


def test_which_commands_go_to_the_host() -> None:
    assert wants_forwarding(["ls"]) and wants_forwarding(["sweep", "status", "s"])
    assert not wants_forwarding(["launch", "--help"])  # the same help here
    assert not wants_forwarding(["recipes"]) and not wants_forwarding(["pull", "r"])


def test_what_cannot_travel_is_refused(tmp_path: Path) -> None:
    assert "spotrun pull" in (refusal(["plot", "r"]) or "")
    assert "--plot" in (refusal(["cost", "--plot", "c.png"]) or "")
    assert "data push" in (refusal(["launch", "digits-fast", "--set", f"data={tmp_path}"]) or "")
    assert refusal(["launch", "digits-fast", "--set", "data=s3://b/d"]) is None
    assert refusal(["launch", "digits-fast", "--set", "lr=0.1"]) is None


def test_launch_arguments_split_into_options_and_values() -> None:
    valued = {"--workdir", "--cmd", "--set"}
    units = _split(["task.yaml", "--workdir=w", "-d", "--cmd", "--workdir", "--set", "a=1"], valued)
    assert units == [
        ["task.yaml"],
        ["--workdir", "w"],
        ["-d"],
        ["--cmd", "--workdir"],
        ["--set", "a=1"],
    ]


def test_without_a_remote_controller_pull_says_the_run_is_here_and_status_describes_this_one(
    env: Env,
) -> None:
    with Ledger(load_settings(env.home)) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", name="here"))
        ledger.transition(run.id, RunState.STOPPED, "made by the test")
    pulled = env.cli("pull", "here", check=True)
    assert f"here is already here: {env.home / 'runs' / run.id}" in pulled.stdout
    status = json.loads(env.cli("controller", "status", "--json", check=True).stdout)
    assert status["where"] == "this machine" and status["home"] == str(env.home)
    assert status["reachable"] and status["live_runs"] == [] and status["pid"] is None


def test_up_elsewhere_is_refused_while_the_controller_lives_on_another_host(env: Env) -> None:
    record = ControllerHost("me", "box", 22, None, "python3", "/r/.spotrun", "/c", "v", 0.0)
    save_record(env.home, record)
    proc = env.cli("controller", "up", "--on", "ssh://other")
    assert proc.returncode == 1 and "lives on ssh://me@box" in proc.stderr, proc.stderr
    assert load_record(env.home) == record


def test_an_aws_record_round_trips_and_an_older_ssh_record_still_loads(tmp_path: Path) -> None:
    record = ControllerHost(
        "root", "10.0.0.9", 22, "/k", "python3", "/root/.spotrun", "/c", "v", 1.0,
        kind="aws", instance_id="i-0abc", region="eu-west-1", instance_type="c6i.large",
        usd_per_hour=0.085, resource_id="controller-0a1b2c3d",
    )  # fmt: skip
    save_record(tmp_path, record)
    assert load_record(tmp_path) == record
    older = json.loads(record_path(tmp_path).read_text())
    for key in ("kind", "instance_id", "region", "instance_type", "usd_per_hour", "resource_id"):
        del older[key]
    record_path(tmp_path).write_text(json.dumps(older))
    loaded = load_record(tmp_path)
    assert loaded is not None and loaded.kind == "ssh" and loaded.instance_id is None


def test_up_on_aws_without_a_controller_profile_is_refused_before_any_aws_call(env: Env) -> None:
    proc = env.cli("controller", "up", "--on", "aws")
    assert proc.returncode == 2 and "controller_instance_profile" in proc.stderr, proc.stderr
    assert load_record(env.home) is None
    record = ControllerHost("me", "box", 22, None, "python3", "/r/.spotrun", "/c", "v", 0.0)
    save_record(env.home, record)
    proc = env.cli("controller", "up", "--on", "aws")
    assert proc.returncode == 1 and "lives on ssh://me@box" in proc.stderr, proc.stderr


def test_a_bad_idle_stop_is_refused_before_any_aws_call(env: Env) -> None:
    proc = env.cli("controller", "up", "--on", "aws", "--idle-stop", "5 minutes")
    assert proc.returncode == 2 and "--idle-stop '5 minutes' is not a duration" in proc.stderr
    assert "90s, 30m, 2h" in proc.stderr and load_record(env.home) is None
    proc = env.cli("controller", "up", "--on", "ssh://me@box", "--idle-stop", "30m")
    assert proc.returncode == 2 and "--idle-stop is for --on aws" in proc.stderr, proc.stderr


def test_controller_status_words_for_a_stopped_and_a_counting_instance() -> None:
    from spotrun.cli.remote import _state_words
    from spotrun.remote_controller.status import ControllerStatus

    at = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC
    st = ControllerStatus("ssh://root@x", "/root/.spotrun", False, None, instance_id="i-1")
    st.instance_state, st.stopped_since = "stopped", at
    assert _state_words(st) == (
        "stopped (idle) since 2026-01-01 00:00:00 UTC; the next command starts it (~1 min)"
    )
    st.instance_state, st.idle_stop_s, st.idle_since, st.stops_in_s = "running", 1800, at, 1200
    assert _state_words(st) == (
        "running; idle since 2026-01-01 00:00:00 UTC, stops itself in 20m00s"
    )
    st.idle_since = None  # something is live
    assert _state_words(st) == "running; something is live: no idle stop while it is"
    st.stops_in_s, st.idle_stop_s = None, 0.0
    assert _state_words(st).startswith("running; idle stop never")
