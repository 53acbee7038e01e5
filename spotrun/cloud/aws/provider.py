"""The AWS spot provider: offers, launch, readiness, runners, bootstrap, termination.

Everything the rest of spotrun sees is the Provider protocol of spotrun.cloud.base; every AWS
error code is mapped in spotrun.cloud.aws.errors. A run's resources (instances, volumes, key
pair, security group) carry its spotrun:run-id tag and are found by it, so every method is safe
to call again from a fresh process after a crash.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shlex
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from spotrun.cloud.aws import checkpoints as store
from spotrun.cloud.aws import instances as ec2i
from spotrun.cloud.aws import network, placement, uploader, volumes
from spotrun.cloud.aws.context import LaunchContext
from spotrun.cloud.aws.dryrun import dry_run
from spotrun.cloud.aws.errors import aws_call
from spotrun.cloud.aws.offers import TypeCatalog, build_offers
from spotrun.cloud.aws.prices import AwsPrices
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.base import Instance, InstanceRequest, Offer, Runner
from spotrun.cloud.ssh_host import SshHost
from spotrun.core.config import Resources, Settings
from spotrun.core.errors import CapacityError, CloudError, RemoteError, UsageError
from spotrun.datasets.placement import TypeStorage
from spotrun.remote.provision import code_bundle, provision

if TYPE_CHECKING:  # paramiko costs a tenth of a second to import; `prices` never needs it
    from spotrun.remote.ssh import HostKeyPins, SshRunner
from spotrun.core.waiting import Backoff, WaitTimeout, wait_until

log = logging.getLogger(__name__)

# A replacement's download of the newest checkpoint from S3 (multi-GB in the region: minutes).
FETCH_TIMEOUT_S = 1800.0


class AwsProvider:
    name = "aws"
    shares_filesystem = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.aws = settings.aws
        self.clients = AwsClients(settings.aws)
        self.prices = AwsPrices(self.clients, settings.home / "cache")
        self.catalog = TypeCatalog(settings.home / "cache")
        self.poll_s = settings.aws.poll_s
        self._runners: dict[str, SshRunner] = {}
        self._boot_checked: dict[str, float] = {}  # instance id -> when EC2 was last asked
        self._lock = threading.Lock()
        self.context = LaunchContext(self.clients, settings.home / "cache")

    # ------------------------------------------------------------- places
    @property
    def _state_dir(self) -> Path:
        return self.settings.home / "aws"

    @property
    def keys_dir(self) -> Path:
        return self.settings.home / "ssh"

    def _run_record(self, run_id: str) -> Path:
        return self._state_dir / "runs" / f"{run_id}.json"

    def run_region(self, run_id: str) -> str:
        """The region the run's resources live in (recorded at launch)."""
        try:
            return str(json.loads(self._run_record(run_id).read_text())["region"])
        except (OSError, ValueError, KeyError):
            return self.aws.region

    def _remember_region(self, run_id: str, region: str, **more: object) -> None:
        path = self._run_record(run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            record = dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            record = {}
        record.update(region=region, **more)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, path)

    def _remember_made(self, run_id: str, ids: list[str]) -> None:
        """The instances RunInstances made for the run, with when: EC2's filtered listings may
        leave them out for a while (eventual consistency), so they are also asked for by id."""
        with self._lock:
            made = {**self._made(run_id), **{i: time.time() for i in ids}}
            self._remember_region(run_id, self.run_region(run_id), made=made)

    def _expiry(self, run_id: str, token: str, max_hours: float | None) -> float:
        """The spotrun:expires moment of a RunInstances, the same for every repeat of it (a
        restarted supervisor's): EC2 refuses a token repeated with other tags."""
        with self._lock:
            try:
                known = dict(json.loads(self._run_record(run_id).read_text()).get("expires", {}))
            except (OSError, ValueError, AttributeError):
                known = {}
            if token not in known:
                known[token] = network.expiry(max_hours, self.aws.expires_after_hours)
                self._remember_region(run_id, self.run_region(run_id), expires=known)
            return float(known[token])

    def _made(self, run_id: str) -> dict[str, float]:
        try:
            made = json.loads(self._run_record(run_id).read_text()).get("made", {})
        except (OSError, ValueError):
            return {}
        return {str(k): float(v) for k, v in made.items()} if isinstance(made, dict) else {}

    def _has_placement_group(self, run_id: str) -> bool:
        try:
            return bool(json.loads(self._run_record(run_id).read_text()).get("placement_group"))
        except (OSError, ValueError):
            return False

    def _region(self, resources: Resources) -> str:
        return self.clients.check_region(resources.region or self.aws.region)

    def subnets(self, region: str) -> dict[str, network.Subnet]:
        return self.context.subnets(region)

    def image(self, region: str) -> ec2i.Image:
        return self.context.image(region)

    @property
    def remote_root(self) -> str:
        if self.aws.remote_root:
            return self.aws.remote_root.rstrip("/")
        user = self.aws.ssh_user
        return f"{'/root' if user == 'root' else f'/home/{user}'}/.spotrun"

    def warm(self) -> None:
        """Make what driving a run needs first (clients, the code bundle) before it is asked."""
        region = self.aws.region
        import spotrun.remote.ssh  # noqa: F401  (paramiko: imported now, not at the first connect)

        self.clients.client("ec2", region)
        if not self.aws.image_id:
            self.clients.client("ssm", region)
        if self.aws.bucket:
            self.clients.client("s3", region)
        code_bundle()

    # ------------------------------------------------------------- offers
    def offers(self, resources: Resources) -> list[Offer]:
        region = self._region(resources)
        zones = sorted(self.subnets(region))
        return build_offers(self.clients, self.prices, region, zones, resources, self.catalog)

    def preflight(self, resources: Resources) -> None:
        """Check what a launch will need before anything is created (bad input -> UsageError)."""
        region = self._region(resources)
        self.image(region)
        if self.aws.bucket:
            store.check_bucket(self.clients.client("s3", region), self.aws.bucket, region)

    def check_cluster_quota(self, offer: Offer, nodes: int) -> None:
        """A multi-node launch: refused at once when the vCPU quota cannot hold N nodes."""
        from spotrun.cloud.aws.quotas import check_cluster_quota

        check_cluster_quota(self.clients, offer, nodes)

    def dry_run(self, offer: Offer) -> list[str]:
        """Ask EC2 (DryRun) whether these credentials may do what a launch does."""
        subnet = self.subnets(offer.region)[offer.zone]
        image = self.image(offer.region)
        return dry_run(self.clients, offer, image, subnet, self.settings.owner)

    # ------------------------------------------------------------- launch
    def launch(self, request: InstanceRequest) -> list[Instance]:
        offer = request.offer
        region = offer.region
        self._remember_region(request.run_id, region)
        known = self._describe(region, request.run_id)
        live = [i for i in known if i.is_live and i.id not in request.replacing]
        shortfall = request.count - len(live)
        if shortfall <= 0:
            return live
        subnets = self.subnets(region)
        if offer.zone not in subnets:
            raise UsageError(f"spotrun has no subnet in {offer.zone}")
        subnet = subnets[offer.zone]
        token = ec2i.client_token(request.run_id, offer, len(known))
        expires = self._expiry(request.run_id, token, request.max_hours)
        tags = network.run_tags(request.run_id, self.settings.owner, expires)
        with ThreadPoolExecutor(max_workers=2) as pool:  # two independent round trips
            key_job = pool.submit(
                network.ensure_key_pair, self.clients, region, self.keys_dir, request.run_id, tags
            )
            group_job = pool.submit(
                network.ensure_security_group, self.clients, region, subnet, request.run_id, tags
            )
            key_name, group_id = key_job.result(), group_job.result()
        cluster = request.count > 1
        if cluster and group_id:
            network.allow_within_group(self.clients, region, group_id)
        group_name = None
        if cluster and offer.cluster_placement:
            self._remember_region(request.run_id, region, placement_group=True)
            group_name = placement.ensure_cluster_group(
                self.clients, region, offer.zone, request.run_id, tags
            )
        params = ec2i.run_instances_params(
            run_id=request.run_id,
            offer=offer,
            count=shortfall,
            image=self.image(region),
            subnet_id=subnet.id,
            security_group_id=group_id,
            key_name=key_name,
            disk_gb=request.disk_gb or self.aws.root_volume_gb,
            tags=tags,
            token=token,
            public_address=self.aws.ssh_address == "public",
            instance_profile=self.aws.instance_profile,
            placement_group=group_name,
            efa=cluster and offer.efa,
        )
        made = ec2i.run_instances(self.clients, region, params)
        self._remember_made(request.run_id, [str(i["InstanceId"]) for i in made])
        if cluster:
            self._all_or_nothing(request, [str(i["InstanceId"]) for i in made], shortfall)
        log.info(
            "run %s: launched %s (%s %s in %s)",
            request.run_id,
            ", ".join(i["InstanceId"] for i in made),
            offer.market,
            offer.instance_type,
            offer.zone,
        )
        private = self.aws.ssh_address == "private"
        made_instances = [
            replace(ec2i.to_instance(item, region, private, len(live) + n), run_id=request.run_id)
            for n, item in enumerate(made)
        ]
        return live + made_instances

    def _all_or_nothing(self, request: InstanceRequest, made: list[str], wanted: int) -> None:
        """A cluster runs on all its nodes or not at all: when EC2 filled part of the request
        (fewer instances, or some ended at once for want of spot capacity), what it did start
        is terminated now rather than left billing, and the offer counts as unfillable."""
        region = request.offer.region
        described = ec2i.describe_ids(self.clients, region, made, fresh=made)
        ended = [i for i in described if not i.is_live]
        if len(made) >= wanted and not ended:
            return
        live = [i.id for i in described if i.is_live]
        ec2i.terminate_ids(self.clients, region, live, wait_s=self.aws.ssh_timeout_s)
        why = "; ".join(f"{i.id} ended at once: {i.state_reason or i.state}" for i in ended)
        offer = request.offer
        raise CapacityError(
            f"partial fill: EC2 started {len(made) - len(ended)} of {wanted} "
            f"{offer.instance_type} in {offer.zone}"
            + (f" ({why})" if why else "")
            + f"; terminated {', '.join(live) or 'nothing'} at once, nothing is left billing"
        )

    def describe(self, run_id: str) -> list[Instance]:
        return self._describe(self.run_region(run_id), run_id)

    def _describe(self, region: str, run_id: str) -> list[Instance]:
        # Only instances made within aws.consistency_s can be missing from the listing for
        # want of consistency; an older one missing from it is gone.
        now = time.time()
        fresh = [i for i, at in self._made(run_id).items() if now - at < self.aws.consistency_s]
        return ec2i.describe_run(self.clients, region, run_id, fresh)

    # -------------------------------------------------------------- ready
    def wait_ready(self, instances: list[Instance], timeout_s: float) -> list[Instance]:
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
                    f"{timeout_s:.0f} s (aws.ssh_timeout_s)",
                )
            self._runner_for(inst).connect()  # pins (or checks) the host key now
        return ready

    def _booted(self, inst: Instance, address: str) -> bool:
        """Whether SSH answers on the instance; raises if EC2 took it back meanwhile (a spot
        reclaim while booting is seen in seconds, not after aws.ssh_timeout_s)."""
        from spotrun.remote.ssh import banner_answers

        if banner_answers(address, self.aws.ssh_port):
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

    # ------------------------------------------------------------ runners
    def _runner_for(self, instance: Instance) -> SshRunner:
        from spotrun.remote.ssh import SshRunner

        if not instance.address:
            raise RemoteError(f"instance {instance.id} has no {self.aws.ssh_address} address")
        with self._lock:
            runner = self._runners.get(instance.id)
            if runner is None or runner.host != instance.address:
                runner = SshRunner(
                    instance.address,
                    self.aws.ssh_port,
                    self.aws.ssh_user,
                    network.key_path(self.keys_dir, instance.run_id),
                    instance_id=instance.id,
                    pins=self.host_keys(instance.run_id),
                )
                self._runners[instance.id] = runner
            return runner

    def host_keys(self, run_id: str) -> HostKeyPins:
        from spotrun.remote.ssh import HostKeyPins

        return HostKeyPins(self.keys_dir / run_id / "hosts")

    def runner(self, instance: Instance) -> Runner:
        return self._runner_for(instance)

    def run_dir(self, instance: Instance, run_id: str) -> str:
        return f"{self.remote_root}/runs/{run_id}"

    def spotrun_command(self, instance: Instance) -> list[str]:
        return [f"{self.remote_root}/venv/bin/python", "-m", "spotrun"]

    def bootstrap(self, instance: Instance, runner: Runner) -> None:
        done = provision(runner, root=self.remote_root, python=self.aws.python)
        log.info(
            "instance %s provisioned (%s code)",
            instance.id,
            "pushed" if done.pushed_code else "had",
        )
        self.start_uploader(instance, runner)

    def start_uploader(self, instance: Instance, runner: Runner) -> None:
        """The instance keeps the checkpoints of `instance.run_id` in S3 as they come (a packed
        sweep trial starts one for its own run on the pack's instance)."""
        if self.aws.bucket:
            uploader.start(
                runner,
                self.run_dir(instance, instance.run_id),
                self._push_command(instance, uploader.WATCH_S),
            )

    def _push_command(self, instance: Instance, watch_s: float) -> str:
        return uploader.push_command(
            self.spotrun_command(instance)[0],
            self.run_dir(instance, instance.run_id),
            instance.run_id,
            str(self.aws.bucket),
            instance.region,
            watch_s,
        )

    def fetch_checkpoint(
        self, instance: Instance, runner: Runner, remote_dir: str, at_least: int
    ) -> store.Fetched | None:
        """Have `instance` download the run's newest whole checkpoint of step `at_least` or
        later from S3 itself (a replacement: in-region, with its instance profile); None when
        the run has no store or the instance could not fetch (the caller pushes instead)."""
        if not self.aws.bucket:
            return None
        command = shlex.join(
            [
                self.spotrun_command(instance)[0],
                "-m",
                "spotrun.cloud.aws.checkpoints",
                "fetch",
                "--run-dir",
                remote_dir,
                "--run-id",
                instance.run_id,
                "--bucket",
                str(self.aws.bucket),
                "--region",
                instance.region,
                "--at-least",
                str(at_least),
            ]
        )
        result = runner.run(command, timeout_s=FETCH_TIMEOUT_S)
        lines = result.stdout.strip().splitlines()
        if not result.ok or not lines:
            log.warning(
                "%s could not fetch a checkpoint from S3: %s", instance.id, result.stderr[-300:]
            )
            return None
        try:
            return store.Fetched.from_json(lines[-1])
        except (ValueError, KeyError, TypeError):
            log.warning("%s: unexpected checkpoint fetch answer: %s", instance.id, lines[-1])
            return None

    def pull_durable(self, run_id: str, local_dir: Path) -> list[str]:
        """Fetch from S3 the run's stored files that `local_dir` lacks."""
        if not self.aws.bucket:
            return []
        region = self.run_region(run_id)
        s3 = self.clients.client("s3", region)
        return store.pull(s3, self.aws.bucket, run_id, local_dir, region)

    # -------------------------------------------------------------- attach
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

    def live_ssh_host(self, run_id: str, node: int | None = None) -> SshHost:
        """SshHost of node `node` (spotrun.control.cluster's order) of a live run."""
        from spotrun.control import cluster

        live = [i for i in self.describe(run_id) if i.is_live]
        if node is not None:
            live = cluster.order(live)[node:]
        if not live or not live[0].address:
            raise RemoteError(f"run {run_id} has no live node {node or 0} to reach")
        head = live[0]
        found = self.ssh_host(run_id, head.id, head.address or "")
        if found is None:
            raise RemoteError(f"spotrun has not connected to {head.id} yet; try again in a moment")
        return found

    def attach_command(self, run_id: str, node: int | None = None) -> list[str]:
        """The user's own ssh, with the run's key and pinned host key, into the tmux session
        (of node `node` of a multi-node run, in spotrun.control.cluster's order)."""
        from spotrun.agent.session import session_name

        host = self.live_ssh_host(run_id, node)
        return host.argv(tty=True, command=f"tmux attach-session -t ={session_name(run_id)}")

    # ----------------------------------------------------------- terminate
    def terminate(self, run_id: str) -> list[Instance]:
        region = self.run_region(run_id)
        billable = [i for i in self._describe(region, run_id) if i.state in ec2i.BILLABLE_STATES]
        if self.aws.bucket:
            for inst in billable:
                if inst.state == "running" and inst.address:
                    uploader.flush(
                        self._runner_for(inst),
                        self.run_dir(inst, run_id),
                        self._push_command(inst, 0.0),
                        inst.id,
                    )
        ids = [i.id for i in billable]
        ec2i.terminate_ids(self.clients, region, ids, wait_s=self.aws.ssh_timeout_s)
        with self._lock:
            for instance_id in ids:
                runner = self._runners.pop(instance_id, None)
                if runner is not None:
                    runner.close()
        if self._has_placement_group(run_id):
            placement.delete_cluster_group(self.clients, region, run_id)
        gone = volumes.delete_run_volumes(self.clients, region, run_id, self.aws.ssh_timeout_s)
        if gone:
            log.info("run %s: deleted data volumes %s", run_id, ", ".join(gone))
        left = network.delete_run_network(self.clients, region, run_id)
        if left:
            log.warning(
                "run %s: security groups %s still in use; `spotrun gc` removes them", run_id, left
            )
        return ec2i.describe_ids(self.clients, region, ids)

    # -------------------------------------------------------------- forget
    def forget(self, run_id: str) -> None:
        """What spotrun keeps of an ended run here and in the cloud (`spotrun rm`): its stored
        files in S3, its SSH key and pinned host keys, its region record. Its instances,
        volumes and security group went when it ended (`spotrun gc` finds any left)."""
        if self.aws.bucket:
            region = self.run_region(run_id)
            count = store.delete_run(
                self.clients.client("s3", region), self.aws.bucket, run_id, region
            )
            if count:
                log.info(
                    "run %s: deleted %d stored file(s) in s3://%s", run_id, count, self.aws.bucket
                )
        shutil.rmtree(self.keys_dir / run_id, ignore_errors=True)
        self._run_record(run_id).unlink(missing_ok=True)

    # --------------------------------------------------------- data volumes
    def attach_snapshot(self, instance: Instance, snapshot_id: str) -> volumes.DataVolume:
        """A volume made from the snapshot in the instance's zone, tagged as the run's, attached
        to it (the same one again when called again); deleted by `terminate`."""
        region = instance.region or self.run_region(instance.run_id)
        snapshot = volumes.snapshot_in(self.clients, region, snapshot_id)
        tags = network.run_tags(
            instance.run_id,
            self.settings.owner,
            network.expiry(None, self.aws.expires_after_hours),
        )
        made = volumes.ensure_volume(
            self.clients, region, instance.zone or "", snapshot, tags, instance.run_id
        )
        return volumes.attach(self.clients, region, made, instance.id, self.aws.ssh_timeout_s)

    def instance_storage(self, instance: Instance) -> TypeStorage | None:
        """What the instance's type offers for data (instance store, memory, EBS ceiling)."""
        region = instance.region or self.run_region(instance.run_id)
        return volumes.type_storage(self.clients, region, instance.instance_type)

    def attach_cache_volume(self, instance: Instance, size_gb: int) -> volumes.CacheAttachment:
        """The run's cache volume for staged data in the instance's zone (the one an earlier
        instance there staged onto, or a new blank one), attached to it; cache volumes of the
        run in other zones are deleted. Deleted by `terminate`."""
        region = instance.region or self.run_region(instance.run_id)
        tags = network.run_tags(
            instance.run_id,
            self.settings.owner,
            network.expiry(None, self.aws.expires_after_hours),
        )
        found = volumes.ensure_cache_volume(
            self.clients, region, instance.zone or "", size_gb, tags, instance.run_id
        )
        attached = volumes.attach(
            self.clients,
            region,
            found.volume,
            instance.id,
            self.aws.ssh_timeout_s,
            volumes.CACHE_DEVICE_NAME,
        )
        return replace(found, volume=attached)

    def terminate_instances(self, run_id: str, ids: list[str]) -> list[Instance]:
        """Terminate these instances of the run only (a replaced one), its network stays."""
        region = self.run_region(run_id)
        mine = {i.id for i in self._describe(region, run_id)}
        ids = [i for i in ids if i in mine]  # never anything the run does not own
        ec2i.terminate_ids(self.clients, region, ids, wait_s=self.aws.ssh_timeout_s)
        with self._lock:
            for instance_id in ids:
                runner = self._runners.pop(instance_id, None)
                if runner is not None:
                    runner.close()
        return ec2i.describe_ids(self.clients, region, ids)

    # ------------------------------------------------------------- prices
    @property
    def on_demand_source(self) -> str:
        return self.prices.on_demand_source

    def spot_price_history(
        self, region: str, zone: str, instance_type: str, start: float, end: float
    ) -> list[tuple[float, float]]:
        return self.prices.spot_price_history(region, zone, instance_type, start, end)

    def on_demand_price(self, region: str, instance_type: str) -> float | None:
        return self.prices.on_demand_price(region, instance_type)
