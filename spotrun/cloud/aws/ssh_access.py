"""Reaching a run's instances over SSH: spotrun's own connections, and the user's ssh.

One SshRunner per instance, kept while it lives (its host key pinned at the first connect, in
SPOTRUN_HOME/ssh/RUN/hosts, and checked at every later one); the user's `spotrun ssh` and
`attach` get the run's key and a known_hosts file holding that pin alone.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from spotrun.cloud.aws import network
from spotrun.cloud.base import Instance
from spotrun.cloud.ssh_host import SshHost
from spotrun.core.config import AwsSettings
from spotrun.core.errors import RemoteError
from spotrun.core.lazy import lazy_module
from spotrun.core.node_order import order

if TYPE_CHECKING:
    from spotrun.remote import ssh as remote_ssh
    from spotrun.remote.ssh import HostKeyPins, SshRunner
else:
    # paramiko (~0.1 s): only once a run connects; `prices` never needs it
    remote_ssh = lazy_module("spotrun.remote.ssh")


class SshAccess:
    def __init__(self, aws: AwsSettings, keys_dir: Path) -> None:
        self.aws = aws
        self.keys_dir = keys_dir
        self._runners: dict[str, SshRunner] = {}
        self._lock = threading.Lock()

    def runner(self, instance: Instance) -> SshRunner:
        """The instance's connection (the same one while its address stays)."""
        if not instance.address:
            raise RemoteError(f"instance {instance.id} has no {self.aws.ssh_address} address")
        with self._lock:
            runner = self._runners.get(instance.id)
            if runner is None or runner.host != instance.address:
                runner = remote_ssh.SshRunner(
                    instance.address,
                    self.aws.ssh_port,
                    self.aws.ssh_user,
                    network.key_path(self.keys_dir, instance.run_id),
                    instance_id=instance.id,
                    pins=self.host_keys(instance.run_id),
                )
                self._runners[instance.id] = runner
            return runner

    def close(self, instance_ids: list[str]) -> None:
        """Close the connections of instances that are gone."""
        with self._lock:
            for instance_id in instance_ids:
                runner = self._runners.pop(instance_id, None)
                if runner is not None:
                    runner.close()

    def host_keys(self, run_id: str) -> HostKeyPins:
        return remote_ssh.HostKeyPins(self.keys_dir / run_id / "hosts")

    def ssh_host(self, run_id: str, instance_id: str, address: str) -> SshHost | None:
        """The run's key and the instance's pinned host key for the user's own ssh; None until
        spotrun has connected to the instance once (nothing is pinned before)."""
        line = self.host_keys(run_id).known_hosts_line(instance_id, address, self.aws.ssh_port)
        if line is None:
            return None
        known_hosts = self.keys_dir / run_id / f"known_hosts-{instance_id}"
        if not known_hosts.exists() or known_hosts.read_text() != line + "\n":
            tmp = known_hosts.with_name(known_hosts.name + ".tmp")
            tmp.write_text(line + "\n")
            os.replace(tmp, known_hosts)
        key = network.key_path(self.keys_dir, run_id)
        return SshHost(address, self.aws.ssh_port, self.aws.ssh_user, key, known_hosts)

    def node_host(self, run_id: str, live: list[Instance], node: int | None) -> SshHost:
        """SshHost of node `node` (spotrun.core.node_order's order) among a run's `live`."""
        if node is not None:
            live = order(live)[node:]
        if not live or not live[0].address:
            raise RemoteError(f"run {run_id} has no live node {node or 0} to reach")
        head = live[0]
        found = self.ssh_host(run_id, head.id, head.address or "")
        if found is None:
            raise RemoteError(f"spotrun has not connected to {head.id} yet; try again in a moment")
        return found
