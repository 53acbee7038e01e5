"""One controller process per SPOTRUN_HOME drives every live run (controller = "one").

In the lab (moto's EC2, an sshd host per instance): three runs of your own command are driven
by the same process; one host then hangs (its sshd stopped: connections open, nothing answers),
and the other two runs still finish while the hung one waits; once the host answers again it
finishes too, and the controller exits when nothing is live.
"""

from __future__ import annotations

import pytest

from spotlab import Lab
from spotlab.fixtures import use_lab
from spotrun.core.config import load_settings
from spotrun.drive.home import running_pid
from spotrun.store.ledger import Ledger, RunRecord
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

# Waits for a file that the test puts on the host itself (not through SSH, which may hang).
JOB = "echo started; while [ ! -e /tmp/go ]; do sleep 0.2; done; echo done"


def _run(env: Env, run_id: str) -> RunRecord:
    with Ledger(load_settings(env.home)) as ledger:
        return ledger.get_run(run_id)


def test_one_controller_and_a_hung_host_delays_no_other_run(env: Env, lab: Lab) -> None:
    # A silent instance is replaced only after 600 s here: the hung run waits, visibly.
    with use_lab(env, lab, unreachable_s=600.0, notice_poll_s=0.5):
        ids = [
            env.cli("launch", "--cmd", JOB, "--cloud", "aws", "-d", check=True).stdout.strip()
            for _ in range(3)
        ]
        hosts = {}
        for run_id in ids:
            wait_for(lambda r=run_id: _run(env, r).state.value == "running", 180, "running")
            (item,) = lab.instances(run_id)
            host = lab.hosts.wait_for(item["InstanceId"], 60)
            log = host.path(f"/root/.spotrun/runs/{run_id}/job.log")
            wait_for(lambda p=log: p.exists() and "started" in p.read_text(), 120, "the job")
            hosts[run_id] = host
        settings = load_settings(env.home)
        controller = running_pid(settings)
        assert controller is not None
        assert {_run(env, r).supervisor_pid for r in ids} == {controller}  # one process

        hung, *healthy = ids
        hosts[hung].hang_ssh()
        try:
            for run_id in ids:
                hosts[run_id].path("/tmp/go").write_text("")
            for run_id in healthy:
                wait_for(lambda r=run_id: _run(env, r).is_terminal, 120, f"{run_id} to end")
                assert _run(env, run_id).state.value == "succeeded", _run(env, run_id).message
            assert _run(env, hung).state.value == "running"  # still waiting on its host
        finally:
            hosts[hung].hang_ssh(False)
        wait_for(lambda: _run(env, hung).is_terminal, 180, "the hung run to end once it answers")
        assert _run(env, hung).state.value == "succeeded", _run(env, hung).message
        assert running_pid(settings) == controller  # the same process all along
        wait_for(lambda: running_pid(settings) is None, 60, "the controller to exit")
