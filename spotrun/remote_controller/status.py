"""`spotrun controller status`: where the controller lives, whether it answers, what it
drives, and for `--on aws` its instance's state (stopped when idle), running hours, cost
and idle countdown. On the host it runs as the same command with the host's home, local
there."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import spotrun
from spotrun.cloud import controller_machines as machines
from spotrun.core.config import Settings
from spotrun.core.errors import RemoteError
from spotrun.drive.home import running_pid
from spotrun.remote.provision import code_bundle
from spotrun.remote_controller import idle_marks
from spotrun.remote_controller import record as records
from spotrun.remote_controller.record import ControllerHost
from spotrun.remote_controller.ssh_binary import SshBinaryRunner
from spotrun.remote_controller.wake import bill_of
from spotrun.store.ledger import Ledger
from spotrun.store.sweeps import SweepStore


def version_here() -> str:
    """This spotrun's version and the digest of its code (two checkouts of one version differ)."""
    return f"{spotrun.__version__}+{code_bundle().digest}"


@dataclass
class ControllerStatus:
    where: str  # "this machine" or ssh://...
    home: str
    reachable: bool
    pid: int | None
    live_runs: list[str] = field(default_factory=list)
    live_sweeps: list[str] = field(default_factory=list)
    version_there: str | None = None
    version_here: str = ""
    problem: str | None = None
    instance_id: str | None = None  # `--on aws`: its instance, up for `hours`, costing `usd`
    instance_type: str | None = None
    hours: float | None = None  # running (a stopped span bills its volume only)
    usd: float | None = None  # compute and root volume
    instance_state: str | None = None  # EC2's: running, stopped ...
    stopped_since: float | None = None  # stopped (idle): since when
    idle_stop_s: float | None = None  # it stops itself this long idle (0: never)
    idle_since: float | None = None  # running: idle since (None: something is live)
    stops_in_s: float | None = None  # running: it stops itself in this long
    idle_error: str | None = None  # its last failure to stop itself

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def local_status(settings: Settings) -> ControllerStatus:
    """This machine's controller: its pid, and what is live under this home."""
    runs: list[str] = []
    sweeps: list[str] = []
    if (settings.home / "ledger.db").exists():
        with Ledger(settings) as ledger:
            runs = [f"{r.name} ({r.state.value})" for r in ledger.active_runs()]
            sweeps = [f"sweep {s.name}" for s in SweepStore(ledger).live()]
    here = version_here()
    pid = running_pid(settings)
    status = ControllerStatus(
        where="this machine",
        home=str(settings.home),
        reachable=True,
        pid=pid,
        live_runs=runs,
        live_sweeps=sweeps,
        version_there=here,
        version_here=here,
    )
    idle = idle_marks.view(settings.home, live=bool(runs or sweeps or pid))
    if idle is not None:  # on a controller instance
        status.idle_stop_s = idle.idle_stop_s
        status.idle_since = idle.idle_since
        status.stops_in_s = idle.stops_in_s
        status.idle_error = idle.error
    return status


def controller_status(settings: Settings) -> ControllerStatus:
    record = records.load_record(settings.home)
    if record is None:
        return local_status(settings)
    status = ControllerStatus(
        where=record.where,
        home=record.home,
        reachable=False,
        pid=None,
        version_here=version_here(),
    )
    if record.kind == "aws" and _aws_status(settings, record, status):
        return status  # stopped: nothing answers there, and nothing is live
    try:
        runner = SshBinaryRunner(settings.home, record)
        result = runner.run(
            record.spotrun_command(["controller", "status", "--json"]), timeout_s=60
        )
    except RemoteError as exc:
        status.problem = exc.user_message()
        return status
    status.reachable = True
    try:
        there = json.loads(result.stdout)
    except ValueError:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        status.problem = f"spotrun on the host answered no status: {' | '.join(tail)}"
        return status
    status.pid = there.get("pid")
    status.live_runs = list(there.get("live_runs", []))
    status.live_sweeps = list(there.get("live_sweeps", []))
    status.version_there = there.get("version_here")
    if record.kind == "aws":
        status.idle_stop_s = there.get("idle_stop_s", status.idle_stop_s)
        status.idle_since = there.get("idle_since")
        status.stops_in_s = there.get("stops_in_s")
        status.idle_error = there.get("idle_error")
    return status


def _aws_status(settings: Settings, record: ControllerHost, status: ControllerStatus) -> bool:
    """The controller instance's state, running hours and cost; True when it is stopped."""
    assert record.instance_id and record.region
    status.instance_id = record.instance_id
    status.instance_type = record.instance_type
    status.idle_stop_s = record.idle_stop_s
    ec2 = machines.describe(record.kind, settings, record.region, record.instance_id)
    status.instance_state = ec2.state
    stopped = ec2.state in ("stopping", "stopped")
    now = time.time()
    open_span = [[ec2.since or now, now]] if stopped else []
    bill = bill_of(dataclasses.replace(record, stopped_spans=record.stopped_spans + open_span))
    status.hours = bill.running_s / 3600
    status.usd = float(bill.total_usd) if bill.total_usd is not None else None
    if stopped:
        status.stopped_since = ec2.since
    return stopped
