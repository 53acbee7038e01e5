"""The laptop's side of the controller instance's idle stop: the next command starts it.

A forwarded command whose shared connection cannot be made asks EC2 about the controller
instance (never before: a command to an instance that answers makes no AWS call). A stopped
one is started (StartInstances, which the user policy allows on instances tagged
spotrun:role=controller only), its new address read and recorded, the host key pinned at
`controller up` carried over to that address, and SSH waited for with that key checked
(StrictHostKeyChecking=yes: another machine at the address is refused, never trusted anew).
The stop is kept in remote.json, so that `spotrun cost` bills no compute for it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from spotrun.cloud import controller_machines as machines
from spotrun.core.config import Settings
from spotrun.core.errors import StateError
from spotrun.cost.controller_bill import ControllerBill, controller_bill
from spotrun.remote_controller import connection as hostrec
from spotrun.remote_controller import record as records
from spotrun.remote_controller.record import ControllerHost
from spotrun.remote_controller.ssh_probe import wait_for_ssh

Log = Callable[[str], None]
DEFAULT_DISK_GB = 20  # what `controller up --on aws` launched with before it was recorded
MIN_WAKE_S = 300.0  # a start and its boot take a minute or two: never wait less than this


def awake(settings: Settings, record: ControllerHost, *, log: Log) -> ControllerHost:
    """`record` itself when it is no controller instance or the shared connection comes up
    (no AWS call on a command's way); else what `wake` makes of it."""
    if record.kind != "aws" or hostrec.ensure_shared_connection(settings.home, record):
        return record
    return wake(settings, record, log=log)


def wake(settings: Settings, record: ControllerHost, *, log: Log) -> ControllerHost:
    """The record to reach the controller with: as it is while the instance runs at its
    recorded address; else, once a stopped instance is started again and answers SSH."""
    assert record.instance_id and record.region
    now = machines.describe(record.kind, settings, record.region, record.instance_id)
    if now.state in ("shutting-down", "terminated"):
        raise StateError(
            f"the controller instance {record.instance_id} is {now.state}",
            hint="`spotrun controller down` forgets it; `spotrun controller up --on aws` "
            "starts a new one",
        )
    timeout_s = max(settings.run.ssh_timeout_s, MIN_WAKE_S)
    if now.state in ("pending", "running"):
        if now.address is None or now.address == record.host:
            return record  # it runs there: the command's own ssh says what is wrong
        address, span = now.address, None  # started by someone else, at a new address
    else:
        log(f"controller instance {record.instance_id} was stopped (idle); starting it, ~1 min")
        address = machines.start(
            record.kind, settings, record.region, record.instance_id, timeout_s
        )
        started = time.time()
        span = [now.since or started, started]
    new = dataclasses.replace(
        record,
        host=address,
        stopped_spans=[*record.stopped_spans, *([span] if span else [])],
    )
    hostrec.close_shared_connection(settings.home, record)
    pinned = hostrec.repin(settings.home, record.target, new.target)
    records.save_record(settings.home, new)
    wait_for_ssh(settings.home, new.target, new.key_file, timeout_s, first_use=not pinned)
    return new


def is_stopped(settings: Settings, record: ControllerHost) -> bool:
    """Whether the controller instance is stopping or stopped (EC2 asked)."""
    assert record.instance_id and record.region
    state = machines.describe(record.kind, settings, record.region, record.instance_id).state
    return state in ("stopping", "stopped")


def bill_of(record: ControllerHost, now: float | None = None) -> ControllerBill:
    """The controller instance's cost since `controller up`: running spans and root volume."""
    return controller_bill(
        since=record.since,
        now=time.time() if now is None else now,
        stopped=record.stopped_spans,
        usd_per_hour=record.usd_per_hour,
        region=record.region or "",
        disk_gb=record.disk_gb or DEFAULT_DISK_GB,
    )
