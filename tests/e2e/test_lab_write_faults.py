"""A ledger read-only for a while wedges no controller (issue 38, point 2), in the lab (moto's
EC2, an sshd host per instance): the controller started while the ledger is immutable waits,
gives way past its bound to a fresh one (the instance runs on), the job finishes meanwhile,
and once the ledger is writable again the run is synced home and succeeds, its instance
terminated, its history saying what it waited for."""

from __future__ import annotations

import json
import os
import signal

import pytest

from spotlab import Lab
from spotlab.fixtures import use_lab
from spotrun.core.config import load_settings
from spotrun.drive.home import running_pid
from tests.conftest import Env
from tests.helpers import wait_for
from tests.immutable_files import ImmutableFiles

pytestmark = pytest.mark.slow

# Waits for a file that the test puts on the host itself.
JOB = "echo started; while [ ! -e /tmp/go ]; do sleep 0.2; done; echo done"


def _status(env: Env, run_id: str) -> dict:
    return json.loads(env.cli("status", run_id, "--json", check=True).stdout)


ENDED = ("succeeded", "failed", "stopped")  # syncing is on the way there


def test_lab_a_read_only_ledger_wedges_no_controller(
    env: Env, lab: Lab, immutable: ImmutableFiles
) -> None:
    with use_lab(env, lab, notice_poll_s=0.5):
        config = env.home / "config.toml"
        config.write_text("ledger_write_wait_s = 3\n" + config.read_text())
        run_id = env.cli("launch", "--cmd", JOB, "--cloud", "aws", "-d", check=True).stdout.strip()
        wait_for(lambda: _status(env, run_id)["state"] == "running", 180, "running")
        (item,) = lab.instances(run_id)
        host = lab.hosts.wait_for(item["InstanceId"], 60)
        log = host.path(f"/root/.spotrun/runs/{run_id}/job.log")
        wait_for(lambda: log.exists() and "started" in log.read_text(), 120, "the job")

        settings = load_settings(env.home)
        first = running_pid(settings)
        assert first is not None
        os.kill(first, signal.SIGKILL)  # the next controller starts on a read-only ledger
        wait_for(lambda: running_pid(settings) is None, 60, "the controller to be gone")
        ledger = env.home / "ledger.db"
        immutable.lock(ledger)
        listed = env.cli("ls")
        assert listed.returncode == 0 and run_id in listed.stdout, listed.stderr
        controller_log = env.home / "controller.log"
        wait_for(
            lambda: "gives way to a fresh one" in controller_log.read_text(),
            120,
            "the controller to give way",
        )
        host.path("/tmp/go").write_text("")
        exit_record = host.path(f"/root/.spotrun/runs/{run_id}/exit.json")
        wait_for(exit_record.exists, 120, "the job to end on its instance")
        assert _status(env, run_id)["state"] == "running"  # nothing failed, nothing ended
        immutable.unlock(ledger)

        wait_for(lambda: _status(env, run_id)["state"] in ENDED, 180, "the run to end")
        status = _status(env, run_id)
        assert status["state"] == "succeeded", status["message"]
        assert "done" in (env.home / "runs" / run_id / "job.log").read_text()  # synced home
        events = " | ".join(e["message"] for e in status["events"])
        assert "could not write" in events and "readonly" in events
        wait_for(
            lambda: all(i["State"]["Name"] == "terminated" for i in lab.instances(run_id)),
            120,
            "its instance to be terminated",
        )
        assert "internal error" not in controller_log.read_text()
        wait_for(lambda: running_pid(settings) is None, 120, "the controller to exit")
