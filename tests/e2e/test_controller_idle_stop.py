"""The controller instance stops itself when idle and the next command starts it (the lab:
moto's StopInstances/StartInstances, the instance a lab host that dies with the stop and boots
again, its files kept, on the start; IAM enforced: its role may stop only itself)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest

from spotlab import Lab
from spotlab.fixtures import use_lab
from spotrun.core.config import load_settings
from spotrun.remote_controller import idle_marks as marks
from spotrun.remote_controller.idle_stop import watch
from spotrun.remote_controller.record import load_record
from tests.conftest import Env
from tests.controller_lab import controller_lab
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


def _state(lab: Lab, instance_id: str) -> str:
    found = lab.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return str(found[0]["Instances"][0]["State"]["Name"])


def test_an_idle_controller_instance_stops_itself_and_the_next_command_starts_it(
    env: Env, lab: Lab
) -> None:
    with controller_lab(env, lab):
        _scenario(env, lab)


IDLE_S = 5  # short, and still longer than one command takes on a loaded machine


def _scenario(env: Env, lab: Lab) -> None:
    up = env.cli(
        "controller", "up", "--on", "aws", "--idle-stop", f"{IDLE_S}s", check=True, timeout=300
    )
    assert f"idle stop   after {IDLE_S}s idle" in up.stdout, up.stdout
    record = load_record(env.home)
    assert record is not None and record.instance_id and record.idle_stop_s == IDLE_S
    instance_id = record.instance_id
    host = lab.hosts.of(instance_id)
    copied = host.path("/root/.spotrun/config.toml").read_text()

    # nothing live, no command: it stops itself (its own role's StopInstances) and its
    # machine goes down with everything on it
    wait_for(lambda: _state(lab, instance_id) == "stopped", timeout=120, what="the idle stop")
    wait_for(lambda: not host.alive, timeout=30, what="the stopped instance's host to go down")

    # the next command starts it, says so in one line, and answers
    listed = env.cli("ls", "--json", timeout=300)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    said = [line for line in listed.stderr.splitlines() if "was stopped" in line]
    assert said == [f"controller instance {instance_id} was stopped (idle); starting it, ~1 min"], (
        listed.stderr
    )
    after = load_record(env.home)
    assert after is not None and len(after.stopped_spans) == 1, after
    stopped_at, started_at = after.stopped_spans[0]
    assert stopped_at < started_at <= time.time()
    booted = lab.hosts.of(instance_id)
    assert booted.alive and booted.host_key_public == host.host_key_public  # the same machine
    assert booted.path("/root/.spotrun/config.toml").read_text() == copied  # its volume kept

    # its bill: compute for the running time only, the root volume for all of it
    cost = env.cli("cost", check=True, timeout=120).stdout
    line = next(x for x in cost.splitlines() if f"controller instance {instance_id}" in x)
    assert "h running, stopped" in line and "EBS 20 GB gp3" in line, line

    # that command started its watcher again: idle once more, it stops again; `status` says
    # so and `down` terminates it without starting it
    wait_for(lambda: _state(lab, instance_id) == "stopped", timeout=120, what="a second stop")
    text = env.cli("controller", "status", check=True).stdout
    assert "state       stopped (idle) since" in text, text
    assert "the next command starts it" in text, text
    down = env.cli("controller", "down", check=True, timeout=300)
    assert "is stopped (idle); terminating it" in down.stderr, down.stderr
    assert _state(lab, instance_id) == "terminated" and load_record(env.home) is None


def test_a_role_that_may_not_stop_the_instance_is_named_in_the_status(
    env: Env, make_lab: Callable[..., Lab]
) -> None:
    """An older controller role without the stop policy: the watcher (in this process, with
    the user's keys, which may start the controller instance but not stop it) keeps the
    instance running, says why where `controller status` reads it, and ends when the idle
    stop is turned off."""
    lab = make_lab(boot="none", bucket=False)
    assert lab.network is not None
    subnet = next(iter(lab.network.subnets.values()))
    tags = [{"Key": "spotrun:role", "Value": "controller"}, {"Key": "spotrun:run-id", "Value": "c"}]
    made = lab.ec2.run_instances(
        ImageId=lab.image_id, InstanceType="c6i.large", MinCount=1, MaxCount=1,
        SubnetId=subnet, TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )  # fmt: skip
    instance_id = made["Instances"][0]["InstanceId"]
    with use_lab(env, lab, max_attempts=1):
        settings = load_settings(env.home)
        marks.write_config(env.home, marks.IdleConfig(instance_id, "us-east-1", 0.2))
        stop = threading.Event()
        watcher = threading.Thread(target=watch, args=(settings, stop), daemon=True)
        watcher.start()
        try:
            seen = wait_for(
                lambda: (v := marks.view(env.home, live=False)) and v.error and v,
                timeout=60,
                what="the watcher's failed stop",
            )
            assert f"could not stop {instance_id}" in seen.error, seen.error
            assert _state(lab, instance_id) == "running"
            status = json.loads(env.cli("controller", "status", "--json", check=True).stdout)
            assert f"could not stop {instance_id}" in (status["idle_error"] or ""), status
            refused = list(lab.front.iam.denied)
            assert refused and all("ec2:StopInstances" in d for d in refused), refused
            lab.front.iam.denied.clear()  # provoked on purpose
        finally:
            marks.write_config(env.home, None)  # off: the watcher ends
            stop.set()
            watcher.join(timeout=30)
        assert not watcher.is_alive()
