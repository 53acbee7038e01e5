"""Waiting for a run's new instances: running in EC2, then an SSH banner, then a verified
connection, all within one bound (run.ssh_timeout_s). A spot reclaim while booting is seen in
seconds (EC2 is asked again every aws.poll_s), not after the bound; an instance that never
answers has the run's instances terminated, so nothing is left billing."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from spotrun.cloud.aws import instances as ec2i
from spotrun.cloud.aws.errors import aws_call
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.aws.ssh_access import SshAccess
from spotrun.cloud.base import Instance
from spotrun.core.config import AwsSettings
from spotrun.core.errors import CloudError, RemoteError
from spotrun.core.lazy import lazy_module
from spotrun.core.waiting import Backoff, WaitTimeout, wait_until

if TYPE_CHECKING:
    from spotrun.remote import ssh as remote_ssh
else:
    remote_ssh = lazy_module("spotrun.remote.ssh")  # paramiko: only once a run boots

# Terminate the run's instances; the names of those it ended.
Terminate = Callable[[str], list[Instance]]


class Readiness:
    def __init__(
        self, clients: AwsClients, aws: AwsSettings, ssh: SshAccess, terminate: Terminate
    ) -> None:
        self.clients = clients
        self.aws = aws
        self.ssh = ssh
        self.terminate = terminate
        self._boot_checked: dict[str, float] = {}  # instance id -> when EC2 was last asked

    def wait(self, instances: list[Instance], timeout_s: float) -> list[Instance]:
        """One bounded wait: running in EC2, then an SSH banner, then a verified connection."""
        if not instances:
            return []
        run_id = instances[0].run_id
        region = instances[0].region
        ids = [i.id for i in instances]
        deadline = time.monotonic() + timeout_s
        ec2 = self.clients.client("ec2", region)
        delay = 2 if timeout_s < 120 else 5
        try:
            with aws_call("ec2", "waiting for RunInstances", region):
                ec2.get_waiter("instance_running").wait(
                    InstanceIds=ids,
                    WaiterConfig={
                        "Delay": delay,
                        "MaxAttempts": max(1, math.ceil(timeout_s / delay)),
                    },
                )
        except CloudError as exc:
            gone = [i for i in ec2i.describe_ids(self.clients, region, ids) if not i.is_live]
            if gone:
                why = gone[0].state_reason or gone[0].state
                raise CloudError(f"instance {gone[0].id} ended while booting: {why}") from exc
            self._give_up(run_id, f"did not reach the running state within {timeout_s:.0f} s")
        ready = ec2i.describe_ids(self.clients, region, ids)
        for inst in ready:
            if not inst.address:
                self._give_up(
                    run_id,
                    f"has no {self.aws.ssh_address} address",
                    hint="set aws.ssh_address = 'private' when spotrun runs inside the VPC",
                )
            address = inst.address
            assert address is not None
            try:
                wait_until(
                    partial(self._booted, inst, address),
                    timeout_s=max(0.0, deadline - time.monotonic()),
                    what=f"SSH on {inst.id}",
                    backoff=Backoff(first_s=0.05, factor=1.5, max_s=2.0),
                )
            except WaitTimeout:
                self._give_up(
                    run_id,
                    f"{inst.id} did not answer SSH on {address}:{self.aws.ssh_port} within "
                    f"{timeout_s:.0f} s (run.ssh_timeout_s)",
                )
            self.ssh.runner(inst).connect()  # pins (or checks) the host key now
        return ready

    def _booted(self, inst: Instance, address: str) -> bool:
        """Whether SSH answers on the instance; raises if EC2 took it back meanwhile (a spot
        reclaim while booting is seen in seconds, not after run.ssh_timeout_s)."""
        if remote_ssh.banner_answers(address, self.aws.ssh_port):
            return True
        checked = self._boot_checked.get(inst.id)
        now = time.monotonic()
        if checked is None or now - checked >= self.aws.poll_s:
            self._boot_checked[inst.id] = now
            if checked is not None:  # (the first look was the waiter's)
                seen = ec2i.describe_ids(self.clients, inst.region, [inst.id])
                if not any(i.is_live for i in seen):
                    why = (seen[0].state_reason or seen[0].state) if seen else "gone"
                    raise CloudError(f"instance {inst.id} ended while booting: {why}")
        return False

    def _give_up(self, run_id: str, what: str, hint: str | None = None) -> None:
        ended = self.terminate(run_id)
        names = ", ".join(i.id for i in ended) or "nothing was left running"
        raise RemoteError(f"instance {what}; terminated {names}", hint=hint)
