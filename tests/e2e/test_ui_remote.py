"""`spotrun ui` with the controller on another host (issue 33, item 1): the dashboard is served
on the host, over its ledger, and reached here through spotrun's ssh connection to it. The
laptop and its always-on host as in test_remote_controller; the host's local cloud runs a
sleeping job of its own command, so its run lives only in the host's ledger. Then a controller
instance (`controller up --on aws` in the lab) stopped while idle: `spotrun ui` starts it, as
any command does, and ends with one line when it stops itself again.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab.hosts import Host
from spotrun.remote_controller.record import load_record
from tests.conftest import Env
from tests.controller_lab import controller_lab
from tests.e2e.test_controller_idle_stop import _state
from tests.e2e.test_remote_controller import laptop  # noqa: F401  (the fixture)
from tests.e2e.test_ui_pages import _fetch
from tests.e2e.ui_browser import Served, chromium, seen, wait_seen
from tests.helpers import WAIT_SCALE, wait_for

pytestmark = pytest.mark.slow

HOST_UI = b"-m\0spotrun\0ui\0"  # the host's dashboard, in a process's command line


def host_dashboards() -> list[str]:
    """The pids of every `spotrun ui` of the controller host (the lab's hosts share this
    machine's pid namespace), none of this side's (no --end-with-input here)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:  # ended meanwhile
            continue
        if HOST_UI in cmdline and b"--end-with-input" in cmdline:
            found.append(entry.name)
    return found


def test_the_dashboard_of_a_controller_host_is_reached_through_its_ssh_connection(
    laptop: tuple[Env, Host, Path],  # noqa: F811
) -> None:
    env, host, key = laptop
    url = f"ssh://root@{host.address}:{host.spec.port}"
    env.cli("controller", "up", "--on", url, "--key", str(key), "--python", sys.executable,
            check=True, timeout=300)  # fmt: skip
    run_id = env.cli(
        "launch", "--cmd", "sleep 600", "--cloud", "local", "--name", "faraway", "-d", check=True
    ).stdout.strip()
    assert not (env.home / "ledger.db").exists()  # the run is in the host's ledger only
    served = Served(env)
    try:
        assert served.base.startswith("http://127.0.0.1:") and len(host_dashboards()) == 1
        browser = chromium()
        try:
            browser.get(served.page("/"))
            wait_seen(browser, f"tr.run-row[data-run='{run_id}']", "the host's run listed")
            (row,) = seen(browser, f"tr.run-row[data-run='{run_id}']")
            assert "faraway" in row["text"] and "sleep 600" in row["text"]
        finally:
            browser.quit()
        status, body = _fetch(served.base + "/api/runs")
        assert status == 403 and "token" in body  # the host's dashboard asks for it
        assert _fetch(served.base + "/api/runs?token=wrong")[0] == 403
    finally:
        served.close()
    assert served.proc.returncode == 0, served.stderr()
    wait_for(lambda: not host_dashboards(), 60, "the host's dashboard to end with this one")
    env.cli("stop", run_id, check=True, timeout=300)


def test_the_dashboard_starts_a_stopped_controller_instance_and_ends_when_it_stops(
    env: Env, lab: Lab
) -> None:
    idle_s = 5  # short, and still longer than one command takes on a loaded machine
    with controller_lab(env, lab):
        env.cli("controller", "up", "--on", "aws", "--idle-stop", f"{idle_s}s",
                check=True, timeout=300)  # fmt: skip
        record = load_record(env.home)
        assert record is not None and record.instance_id
        instance = record.instance_id
        wait_for(lambda: _state(lab, instance) == "stopped", 120, "the idle stop")
        served = Served(env)  # the URL comes once the started instance's dashboard gave it
        try:
            said = served.proc.stderr.readline() if served.proc.stderr else ""
            assert "was stopped (idle); starting it" in said, said
            assert _state(lab, instance) == "running"
            # idle again (nothing live), it stops itself: the dashboard here ends, saying why
            served.proc.wait(timeout=300 * WAIT_SCALE)
        finally:
            served.close()
        assert served.proc.returncode == 1
        assert "closed: its dashboard is gone" in served.stderr(), served.stderr()
        assert _state(lab, instance) in ("stopping", "stopped")
