"""The free first hour (issue 32, item 5): AWS does not bill a spot instance EC2 interrupts in its
first hour, and bills one the user stops or terminates ("Billing for interrupted Spot
Instances"). After a notice spotrun collects the doomed instance's checkpoint, then leaves the
instance for EC2 to terminate instead of terminating it itself; if EC2 does not come, spotrun
terminates it after the notice's time plus aws.reclaim_margin_s.

The job is a script that waits for the test to say go, so every moment asserted on comes while
the run still runs (no race with the run's end): a notice is announced through the instance's
metadata service, and EC2's reclaim is made by the test when it asserts one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab.fixtures import use_lab
from spotlab.interruptions import notice_document
from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

# Saves an attempt marker in the checkpoint folder, exits 75 (checkpointed) on SIGTERM, and
# otherwise waits for the file `go` (made by `spotrun exec`).
JOB = """\
import os, signal, sys, time
from pathlib import Path

ck = Path(os.environ["SPOTRUN_CHECKPOINT_DIR"])
attempt = len(list(ck.glob("attempt-*"))) + 1
(ck / f"attempt-{attempt}").write_text("saved")
print(f"attempt {attempt}", flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(75))
while not Path("go").exists():
    time.sleep(0.1)
print("done", flush=True)
"""
LIVE = ("pending", "running", "stopping", "stopped")
SPOT_RECLAIM = "Server.SpotInstanceTermination"


def _task(root: Path) -> Path:
    proj = root / "proj"
    proj.mkdir(parents=True)
    (proj / "job.py").write_text(JOB)
    task = root / "task.yaml"
    task.write_text(
        "resources: {gpus: 0}\n"
        "workdir: proj\n"
        'run: "$PY job.py"\n'
        f"envs: {{PY: {json.dumps(sys.executable)}}}\n"
        "checkpoint_dir: ckpt\n"
    )
    return task


def _events(env: Env, run_id: str) -> list[str]:
    with Ledger(load_settings(env.home)) as ledger:
        return [f"{e.kind}: {e.message}" for e in ledger.events(run_id)]


def _event(env: Env, run_id: str, text: str) -> str:
    found = wait_for(
        lambda: next((e for e in _events(env, run_id) if text in e), None),
        120,
        f"an event saying {text!r}",
    )
    return str(found)


def _running_attempt(env: Env, lab: Lab, run_id: str, attempt: int) -> str:
    """The instance the job runs on, once its `attempt`-th start printed."""

    def there() -> str | None:
        live = lab.instances(run_id, states=("running",))
        for item in reversed(live):
            host = lab.hosts.get(item["InstanceId"])
            log = host.path(f"/root/.spotrun/runs/{run_id}/job.log") if host else None
            if log is not None and log.exists() and f"attempt {attempt}" in log.read_text():
                return str(item["InstanceId"])
        return None

    # once a second: each look asks the lab's EC2, and nothing asserted needs it sooner
    return str(wait_for(there, 120, f"attempt {attempt} of run {run_id} running", interval=1.0))


def _announce(lab: Lab, instance_id: str, acts_in_s: float) -> None:
    """EC2's interruption notice, in the instance's metadata (its time in the instance's own
    frame, as the lab's clock offset puts it), with no reclaim scheduled."""
    document = notice_document("terminate", lab.hosts.imds(instance_id).now() + acts_in_s)
    lab.hosts.imds(instance_id).announce("meta-data/spot/instance-action", document)


def _finish(env: Env, run_id: str) -> None:
    env.cli("exec", run_id, "--cmd", "touch go", check=True)
    wait_for(lambda: env.run_state(run_id) == "succeeded", 120, f"run {run_id} to succeed")


def _compute_by_instance(env: Env, run_id: str) -> dict[str, float]:
    """What `spotrun cost RUN` priced, per instance (the ledger's compute lines it wrote)."""
    (row,) = json.loads(env.cli("cost", run_id, "--json", check=True).stdout)
    assert row["error"] is None, row
    with Ledger(load_settings(env.home)) as ledger:
        return {
            str(line.instance_id): line.usd
            for line in ledger.cost_lines(run_id)
            if line.kind == "compute"
        }


def _end_reason(env: Env, run_id: str, instance_id: str) -> str:
    with Ledger(load_settings(env.home)) as ledger:
        (record,) = [r for r in ledger.instances(run_id) if r.id == instance_id]
    assert record.terminated_at is not None, record
    return str(record.end_reason)


def _launch(env: Env, task: Path) -> str:
    return env.cli("launch", str(task), "--cloud", "aws", "-d", check=True).stdout.strip()


def test_interrupted_in_first_hour_is_left_to_ec2_and_free_a_stop_is_billed(
    env: Env, lab: Lab, tmp_path: Path
) -> None:
    """Run A gets a notice in its first hour: once the checkpoint is stored its instance is left
    for EC2 (which the test then is), the run resumes on a replacement and succeeds, the ledger
    records the end as EC2's interruption and `spotrun cost` charges its compute nothing. Run B,
    stopped by the user in its first hour, pays its seconds (60 at least)."""
    with use_lab(env, lab):
        task = _task(tmp_path)
        interrupted, stopped = _launch(env, task), _launch(env, task)
        first = _running_attempt(env, lab, interrupted, 1)
        _running_attempt(env, lab, stopped, 1)

        _announce(lab, first, acts_in_s=600.0)  # EC2 comes when the test says
        left = _event(env, interrupted, f"{first}'s checkpoint is stored: left for EC2")
        assert "not billed" in left, left
        second = _running_attempt(env, lab, interrupted, 2)
        assert second != first
        (item,) = [i for i in lab.instances(interrupted) if i["InstanceId"] == first]
        assert item["State"]["Name"] == "running", "spotrun must leave it to EC2"
        # Meanwhile the run's commands reach the replacement, not the instance left to EC2.
        reached = env.cli("exec", interrupted, "--cmd", "echo reached")
        assert reached.returncode == 0 and "reached" in reached.stdout, reached.stderr
        lab.interruptions.reclaim(first)
        _event(env, interrupted, f"EC2 reclaimed {first}")
        _finish(env, interrupted)

        env.cli("stop", stopped, check=True)
        wait_for(lambda: env.run_state(stopped) == "stopped", 120, "the stopped run's end")

        assert SPOT_RECLAIM in _end_reason(env, interrupted, first)
        compute = _compute_by_instance(env, interrupted)
        assert compute[first] == 0 and compute[second] > 0, compute
        (stopped_instance,) = [i["InstanceId"] for i in lab.instances(stopped)]
        assert SPOT_RECLAIM not in _end_reason(env, stopped, stopped_instance)
        assert _compute_by_instance(env, stopped)[stopped_instance] > 0
        assert lab.instances(interrupted, states=LIVE) == []
        assert lab.instances(stopped, states=LIVE) == []


def test_a_notice_ec2_does_not_follow_is_ended_by_spotrun(
    env: Env, lab: Lab, tmp_path: Path
) -> None:
    """A notice whose reclaim never comes: the instance left for EC2 is terminated by spotrun
    once the notice's time plus aws.reclaim_margin_s has passed, while the run goes on on its
    replacement; its end is spotrun's (billed), and nothing is left running.

    The notice gives 40 s (EC2 gives 120): the agent's checkpoint window is what is left less
    its 20 s upload margin. A 5 s notice, as this test had, left the job 2.5 s to save and
    exit, too short on a loaded machine; then nothing was checkpointed and spotrun rightly
    ended the instance itself, never leaving it to EC2."""
    with use_lab(env, lab, reclaim_margin_s=2.0):
        run_id = _launch(env, _task(tmp_path))
        first = _running_attempt(env, lab, run_id, 1)
        _announce(lab, first, acts_in_s=40.0)
        _event(env, run_id, f"{first}'s checkpoint is stored: left for EC2")
        _event(env, run_id, f"terminated {first}: EC2 did not reclaim it")
        (item,) = [i for i in lab.instances(run_id) if i["InstanceId"] == first]
        assert item["State"]["Name"] == "terminated"
        assert env.run_state(run_id) == "running"  # ended while the run goes on, not by its end
        _running_attempt(env, lab, run_id, 2)
        _finish(env, run_id)
        reason = _end_reason(env, run_id, first)
        assert "EC2 did not reclaim" in reason and SPOT_RECLAIM not in reason, reason
        assert lab.instances(run_id, states=LIVE) == []


def test_an_instance_clock_hours_off_still_leaves_it_to_ec2_within_the_notice(
    env: Env, lab: Lab, tmp_path: Path
) -> None:
    """Two runs in their first hour whose instances' clocks are 2 h behind and 2 h ahead of the
    controller's get a notice (its time in the instance's frame, 10 minutes ahead). Both are
    left for EC2 and ended by it, free. Before, the controller read the notice's time on its
    own clock: 2 h behind, it was already past and spotrun terminated the instance at once
    (billed); 2 h ahead, the instance looked past its first hour and spotrun ended it."""
    with use_lab(env, lab):
        task = _task(tmp_path)
        firsts: dict[str, str] = {}
        for offset_s in (-7200.0, 7200.0):
            lab.hosts.clock_offset_s = offset_s  # the hosts booted from now on
            run_id = _launch(env, task)
            firsts[run_id] = _running_attempt(env, lab, run_id, 1)
        lab.hosts.clock_offset_s = 0.0
        for first in firsts.values():
            _announce(lab, first, acts_in_s=600.0)
        for run_id, first in firsts.items():
            _event(env, run_id, f"{first}'s checkpoint is stored: left for EC2")
            (item,) = [i for i in lab.instances(run_id) if i["InstanceId"] == first]
            assert item["State"]["Name"] == "running", _events(env, run_id)
            lab.interruptions.reclaim(first)
            _event(env, run_id, f"EC2 reclaimed {first}")
            assert SPOT_RECLAIM in _end_reason(env, run_id, first)
            assert not [e for e in _events(env, run_id) if "EC2 did not reclaim" in e]
        for run_id in firsts:
            env.cli("stop", run_id, check=True)
            wait_for(lambda r=run_id: env.run_state(r) == "stopped", 120, f"run {run_id} to stop")
            assert lab.instances(run_id, states=LIVE) == []
