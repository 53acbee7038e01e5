"""The lab's instances as machines: a watcher pairs every instance of the lab's VPCs with a real
sshd host on its address (hosts.py), started once the instance has booted and killed, with all
its processes, when it ends; each host has an IMDSv2 endpoint (imds.py)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from spotlab.clock import SHIM_DIR
from spotlab.consistency import Consistency
from spotlab.hosts import HOST_HOME, Host, HostSpec
from spotlab.imds import Imds
from spotlab.moto_server import state_changes
from spotlab.regions import region_of_zone

LIVE = ("pending", "running")
# A look every few seconds even when nothing seems to have changed: a wake-up missed for any
# reason (a change moto made without a request) costs a boot seconds, never a test.
FALLBACK_LOOK_S = 5.0


def image_paths() -> tuple[str, ...]:
    """This interpreter's folders and the clock shim's under /root or /tmp: the hosts' "image"
    must keep them (a checkout under /tmp otherwise loses its shim on the hosts, whose clocks
    then silently agree with this machine's)."""
    found = {
        str(Path(p).resolve())
        for p in (sys.base_prefix, sys.prefix, SHIM_DIR)
        if str(Path(p).resolve()).startswith((HOST_HOME + "/", "/tmp/"))
    }
    return tuple(sorted(found))


class LabHosts:
    """The live hosts by instance id (`id in lab.hosts`, `lab.hosts.get(id)`), and the ended
    ones kept for a look at their files.

    boot: "ssh" (a real sshd answers on each instance), "silent" (the port accepts and never
    sends a banner, as a hung boot), "none" (nothing listens).
    """

    def __init__(
        self,
        root: Path,
        consistency: Consistency,
        instances: Callable[..., list[dict[str, Any]]],
        client: Callable[..., Any],
        *,
        boot: str,
        boot_s: float,
        nice: int,
    ) -> None:
        self.root = root
        self.consistency = consistency
        self.instances = instances
        self.client = client
        self.boot = boot
        # Seconds from "running" in EC2 (after pending) to the host answering SSH: nothing
        # listens on the instance's address before, as on EC2 while it boots (20-60 s there)
        self.boot_s = boot_s
        self.nice = nice
        # Seconds the wall clock of hosts booted from now on is off the lab's (spotlab.clock).
        self.clock_offset_s = 0.0
        self.ssh_port = 0
        self.imds_port = 0
        self.endpoint_url = ""  # the front's: what boto3 on a host reaches
        # what an instance's IMDS serves as its role's credentials (LabIam.credentials_reader)
        self.credentials: Callable[[str], Callable[[], dict[str, str] | None]] | None = None
        self.live: dict[str, Host] = {}
        self.ended: dict[str, Host] = {}
        self._imds: dict[str, Imds] = {}
        self._first_seen: dict[str, float] = {}
        self.errors: list[str] = []  # what went wrong inside the watcher thread
        self.changed = threading.Event()  # set: look at the instances again now
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._synced = threading.Condition(self._lock)  # notified after each look
        self._watcher: threading.Thread | None = None

    # --------------------------------------------------------- look ups
    def __contains__(self, instance_id: object) -> bool:
        return instance_id in self.live

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.live))

    def get(self, instance_id: str) -> Host | None:
        return self.live.get(instance_id)

    def of(self, instance_id: str) -> Host:
        """The host of a live instance (or of an ended one, for a look at its files)."""
        with self._lock:
            found = self.live.get(instance_id) or self.ended.get(instance_id)
        if found is None:
            raise KeyError(f"the lab has no host for {instance_id}")
        return found

    def wait_for(self, instance_id: str, timeout_s: float = 10.0) -> Host:
        deadline = time.monotonic() + timeout_s
        self.changed.set()
        with self._synced:
            while instance_id not in self.live:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no host came up for {instance_id}")
                # Each look wakes this; a boot's end has its own timer, so asking for a look
                # of our own only when none came for a while keeps the watcher from spinning.
                if not self._synced.wait(min(left, 0.5)):
                    self.changed.set()
            return self.live[instance_id]

    def replace_key(self, instance_id: str) -> str:
        """Restart the instance's host with a new host key (a different machine answering)."""
        host = self.of(instance_id)
        host.restart(new_host_key=True)
        return host.host_key_public

    def imds(self, instance_id: str) -> Imds:
        return self._imds[instance_id]

    def imds_of(self, instance_id: str) -> Imds | None:
        return self._imds.get(instance_id)

    # ------------------------------------------------------------ watcher
    def start(self, name: str) -> None:
        self._watcher = threading.Thread(target=self._watch, name=name, daemon=True)
        self._watcher.start()

    def stop_watching(self) -> None:
        self._stop.set()
        self.changed.set()
        if self._watcher is not None:
            self._watcher.join(timeout=10)

    def _watch(self) -> None:
        looked_at = -1  # moto's state_changes() at the last look that went through
        last_look = 0.0
        while not self._stop.is_set():
            asked = self.changed.wait(timeout=0.5)
            self.changed.clear()
            if self._stop.is_set():
                break
            changes = state_changes()  # before the look: a change during it brings another
            quiet_s = time.monotonic() - last_look
            if not asked and changes == looked_at and quiet_s < FALLBACK_LOOK_S:
                continue  # nothing in moto changed, no boot came due: the last look holds
            try:
                last_look = time.monotonic()
                self.sync()
                looked_at = changes
            except Exception as exc:  # the watcher must outlive one bad poll; tests see errors
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def sync(self) -> None:
        """Start hosts for new instances, kill hosts of ended ones."""
        with self._lock:
            for item in self.instances():
                instance_id = item["InstanceId"]
                state = item["State"]["Name"]
                if state in LIVE and instance_id not in self.live:
                    if instance_id in self.ended:
                        # stopped, then started again (a terminated one never runs again):
                        # the same machine boots, its files (the EBS root volume) kept
                        if state == "running":
                            self._start_host(item, again=self.ended.pop(instance_id))
                    elif self._booted(instance_id):
                        self._start_host(item)
                elif state not in LIVE and instance_id in self.live:
                    self._end_host(instance_id)
            self._synced.notify_all()

    def end_all(self) -> None:
        with self._lock:
            for instance_id in list(self.live):
                self._end_host(instance_id)

    def _booted(self, instance_id: str) -> bool:
        """Whether the instance has booted: pending, then running for boot_s."""
        boot_s = self.boot_s + self.consistency.pending_s
        if boot_s <= 0:
            return True
        born = self.consistency.born.get(instance_id)  # when RunInstances made it
        seen = self._first_seen.setdefault(instance_id, time.monotonic() if born is None else born)
        left = seen + boot_s - time.monotonic()
        if left > 0:
            timer = threading.Timer(left, self.changed.set)
            timer.daemon = True
            timer.start()
            return False
        return True

    def _start_host(self, item: dict[str, Any], again: Host | None = None) -> None:
        """Boot the instance's host; `again`: the host it had before a stop, booted again."""
        instance_id = item["InstanceId"]
        address = item["PrivateIpAddress"]
        region = region_of_zone(item["Placement"]["AvailabilityZone"])
        key = None
        if item.get("KeyName"):
            pairs = self.client("ec2", region).describe_key_pairs(
                KeyNames=[item["KeyName"]], IncludePublicKey=True
            )
            key = pairs["KeyPairs"][0].get("PublicKey")
        imds = None
        if self.boot != "none":
            assert self.credentials is not None
            imds = Imds(
                address,
                self.imds_port,
                instance_id=instance_id,
                instance_type=item["InstanceType"],
                zone=item["Placement"]["AvailabilityZone"],
                region=region,
                ami_id=item["ImageId"],
                credentials=self.credentials(instance_id),
                clock_offset_s=self.clock_offset_s,
            )
            self._imds[instance_id] = imds
        env = {"AWS_ENDPOINT_URL": self.endpoint_url, "AWS_DEFAULT_REGION": region}
        if imds is not None:
            env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = imds.url + "/"
        spec = HostSpec(
            instance_id=instance_id,
            address=address,
            port=self.ssh_port,
            authorized_key=key,
            env=env,
            home_config=f'[aws]\nmetadata_url = "{imds.url}"\n' if imds else None,
            image_paths=image_paths(),
            nice=self.nice,
            clock_offset_s=self.clock_offset_s,
        )
        host = again or Host(spec, self.root / "hosts" / instance_id, mode=self.boot)
        if self.boot != "none":
            host.start(boot_again=again is not None)
        self.live[instance_id] = host

    def _end_host(self, instance_id: str) -> None:
        host = self.live.pop(instance_id)
        host.stop()
        imds = self._imds.pop(instance_id, None)
        if imds is not None:
            imds.stop()
        self.ended[instance_id] = host
