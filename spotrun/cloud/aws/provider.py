"""The AWS spot provider: offers, launch, readiness, runners, bootstrap, termination.

Everything the rest of spotrun sees is the Provider protocol of spotrun.cloud.base (and the
capabilities of spotrun.cloud.capabilities); every AWS error code is mapped in
spotrun.cloud.aws.errors. A run's resources (instances, volumes, key pair, security group)
carry its spotrun:run-id tag and are found by it, so every method is safe to call again from a
fresh process after a crash. The provider is the facade; its parts do the work: launching and
finding instances (run_launch), waiting for them (readiness), SSH (ssh_access), S3
(durable_store), the run's local record (region_records), volumes, network, prices.
"""

from __future__ import annotations

import importlib
import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from spotrun.cloud.aws import checkpoints, network, placement, volumes
from spotrun.cloud.aws import instances as ec2i
from spotrun.cloud.aws.context import LaunchContext
from spotrun.cloud.aws.dryrun import dry_run
from spotrun.cloud.aws.durable_store import DurableStore
from spotrun.cloud.aws.offers import TypeCatalog, launch_regions, regional_offers
from spotrun.cloud.aws.placement_scores import PlacementScores
from spotrun.cloud.aws.prices import AwsPrices
from spotrun.cloud.aws.quota_table import quota_of
from spotrun.cloud.aws.quotas import check_cluster_quota, launch_refusal, screen_offers
from spotrun.cloud.aws.readiness import Readiness
from spotrun.cloud.aws.region_records import RegionRecords
from spotrun.cloud.aws.run_launch import RunLaunch
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.aws.ssh_access import SshAccess
from spotrun.cloud.base import Instance, InstanceRequest, Offer
from spotrun.cloud.quota_screen import QuotaScreen
from spotrun.cloud.ranking import Pool, RegionalOffers
from spotrun.cloud.ssh_host import SshHost
from spotrun.core.config import Resources, Settings
from spotrun.core.errors import QuotaError
from spotrun.core.lazy import lazy_module
from spotrun.datasets.placement import TypeStorage
from spotrun.remote.provision import code_bundle, provision
from spotrun.remote.runner import Runner

if TYPE_CHECKING:
    from spotrun.agent import session as agent_session
else:
    agent_session = lazy_module("spotrun.agent.session")  # libtmux (~70 ms): `attach` only

log = logging.getLogger(__name__)


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
        self.context = LaunchContext(self.clients, settings.home / "cache")
        self.records = RegionRecords(settings.home / "aws" / "runs", settings.aws.region)
        self.ssh = SshAccess(settings.aws, self.keys_dir)
        self.launcher = RunLaunch(settings, self.clients, self.context, self.records, self.keys_dir)
        self.readiness = Readiness(self.clients, settings.aws, self.ssh, self.terminate)
        self.store = DurableStore(self.clients, settings.aws)
        self.scorer = PlacementScores(self.clients, settings.home / "cache")

    # ------------------------------------------------------------- places
    @property
    def keys_dir(self) -> Path:
        return self.settings.home / "ssh"

    def run_region(self, run_id: str) -> str:
        """The region the run's resources live in (recorded at launch)."""
        return self.records.region(run_id)

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
        importlib.import_module("spotrun.remote.ssh")  # paramiko now, not at the first connect

        self.clients.client("ec2", region)
        if not self.aws.image_id:
            self.clients.client("ssm", region)
        if self.aws.bucket:
            self.clients.client("s3", region)
        code_bundle()

    # ------------------------------------------------------------- offers
    def offers(self, resources: Resources) -> list[Offer]:
        return self.regional_offers(resources).offers

    def _regions(self, resources: Resources) -> list[str]:
        regions = launch_regions(resources, list(self.aws.regions), self.aws.region)
        return [self.clients.check_region(r) for r in regions]

    def regional_offers(self, resources: Resources) -> RegionalOffers:
        """Offers from each region the launch may use (--region, --regions), each with its
        own subnets and prices; a region without a fitting offer is left out with a line."""
        return regional_offers(
            self.clients,
            self.prices,
            self._regions(resources),
            lambda region: sorted(self.subnets(region)),
            resources,
            self.catalog,
        )

    def placement_scores(self, offers: Sequence[Offer]) -> Mapping[Pool, int]:
        """EC2's spot placement scores of the cheapest types' pools (none where not permitted)."""
        return self.scorer.scores(offers)

    def preflight(self, resources: Resources) -> None:
        """Check what a launch will need before anything is created (bad input -> UsageError)."""
        for region in self._regions(resources):
            self.image(region)
        region = self.aws.region  # the bucket's
        if self.aws.bucket:
            checkpoints.check_bucket(self.clients.client("s3", region), self.aws.bucket, region)

    def check_cluster_quota(self, offer: Offer, nodes: int) -> None:
        """A multi-node launch: refused at once when the vCPU quota cannot hold N nodes."""
        check_cluster_quota(self.clients, offer, nodes)

    def screen_quotas(self, offers: list[Offer], nodes: int) -> QuotaScreen:
        """The offers whose vCPU quota holds `nodes` of them (Service Quotas, when it says)."""
        return screen_offers(self.clients, offers, nodes)

    def quota_name(self, offer: Offer) -> str | None:
        quota = quota_of(offer.instance_type, offer.market == "spot")
        return quota.name if quota is not None else None

    def dry_run(self, offer: Offer) -> list[str]:
        """Ask EC2 (DryRun) whether these credentials may do what a launch does."""
        subnet = self.subnets(offer.region)[offer.zone]
        image = self.image(offer.region)
        return dry_run(
            self.clients,
            offer,
            image,
            subnet,
            self.settings.owner,
            self.settings.run.root_volume_gb,
        )

    # ------------------------------------------------------ launch, ready
    def launch(self, request: InstanceRequest) -> list[Instance]:
        try:
            return self.launcher.launch(request)
        except QuotaError as exc:  # EC2's quota refusal: with the value this launch needs
            refusal = launch_refusal(self.clients, exc, request.offer, request.count)
            if refusal is exc:
                raise
            raise refusal from exc

    def describe(self, run_id: str) -> list[Instance]:
        found: list[Instance] = []
        for region in self.records.regions(run_id):  # a replacement may be in another region
            found += self.launcher.describe(region, run_id)
        # Live ones newest first: a noticed instance left for EC2 to reclaim (its first hour is
        # then free) runs beside its replacement, and `exec`, `attach` and `ssh` take the latter.
        live = sorted((i for i in found if i.is_live), key=lambda i: -(i.launched_at or 0.0))
        return live + [i for i in found if not i.is_live]

    def wait_ready(self, instances: list[Instance], timeout_s: float) -> list[Instance]:
        """One bounded wait: running in EC2, then an SSH banner, then a verified connection."""
        return self.readiness.wait(instances, timeout_s)

    # ------------------------------------------------------------ runners
    def runner(self, instance: Instance) -> Runner:
        return self.ssh.runner(instance)

    def run_dir(self, instance: Instance, run_id: str) -> str:
        return f"{self.remote_root}/runs/{run_id}"

    def spotrun_command(self, instance: Instance) -> list[str]:
        return [f"{self.remote_root}/venv/bin/python", "-m", "spotrun"]

    def _python(self, instance: Instance) -> str:
        return self.spotrun_command(instance)[0]

    def bootstrap(self, instance: Instance, runner: Runner) -> None:
        done = provision(runner, root=self.remote_root, python=self.aws.python)
        log.info(
            "instance %s provisioned (%s code)",
            instance.id,
            "pushed" if done.pushed_code else "had",
        )
        self.start_uploader(instance, runner)

    # ------------------------------------------------------- durable store
    def start_uploader(self, instance: Instance, runner: Runner) -> None:
        """The instance keeps the checkpoints of `instance.run_id` in S3 as they come (a packed
        sweep trial starts one for its own run on the pack's instance)."""
        remote_dir = self.run_dir(instance, instance.run_id)
        self.store.start_uploader(instance, runner, self._python(instance), remote_dir)

    def fetch_checkpoint(
        self, instance: Instance, runner: Runner, remote_dir: str, at_least: int
    ) -> checkpoints.Fetched | None:
        """Have `instance` fetch the run's newest whole checkpoint from S3 itself."""
        python = self._python(instance)
        return self.store.fetch_checkpoint(instance, runner, python, remote_dir, at_least)

    def pull_durable(self, run_id: str, local_dir: Path) -> list[str]:
        """Fetch from S3 the run's stored files that `local_dir` lacks."""
        if not self.aws.bucket:
            return []
        return self.store.pull(run_id, self.aws.region, local_dir)

    # -------------------------------------------------------------- attach
    def ssh_host(self, run_id: str, instance_id: str, address: str) -> SshHost | None:
        """The run's key and the instance's pinned host key for the user's own ssh; None until
        spotrun has connected to the instance once (nothing is pinned before)."""
        return self.ssh.ssh_host(run_id, instance_id, address)

    def live_ssh_host(self, run_id: str, node: int | None = None) -> SshHost:
        """SshHost of node `node` (spotrun.core.node_order's order) of a live run."""
        return self.ssh.node_host(run_id, [i for i in self.describe(run_id) if i.is_live], node)

    def attach_command(self, run_id: str, node: int | None = None) -> list[str]:
        """The user's own ssh, with the run's key and pinned host key, into the tmux session
        (of node `node` of a multi-node run, in spotrun.core.node_order's order)."""
        host = self.live_ssh_host(run_id, node)
        session = agent_session.session_name(run_id)
        return host.argv(tty=True, command=f"tmux attach-session -t ={session}")

    # ----------------------------------------------------------- terminate
    def terminate(self, run_id: str) -> list[Instance]:
        ended: list[Instance] = []
        for region in self.records.regions(run_id):
            ended += self._terminate_in(region, run_id)
        return ended

    def _terminate_in(self, region: str, run_id: str) -> list[Instance]:
        described = self.launcher.describe(region, run_id)
        billable = [i for i in described if i.state in ec2i.BILLABLE_STATES]
        if self.aws.bucket:
            for inst in billable:
                if inst.state == "running" and inst.address:
                    remote_dir = self.run_dir(inst, run_id)
                    self.store.flush(inst, self.ssh.runner(inst), self._python(inst), remote_dir)
        ids = [i.id for i in billable]
        ec2i.terminate_ids(self.clients, region, ids, wait_s=self.settings.run.ssh_timeout_s)
        self.ssh.close(ids)
        if self.records.has_placement_group(run_id):
            placement.delete_cluster_group(self.clients, region, run_id)
        gone = volumes.delete_run_volumes(
            self.clients, region, run_id, self.settings.run.ssh_timeout_s
        )
        if gone:
            log.info("run %s: deleted data volumes %s", run_id, ", ".join(gone))
        left = network.delete_run_network(self.clients, region, run_id)
        if left:
            log.warning(
                "run %s: security groups %s still in use; `spotrun gc` removes them", run_id, left
            )
        return ec2i.describe_ids(self.clients, region, ids)

    def terminate_instances(self, run_id: str, ids: list[str]) -> list[Instance]:
        """Terminate these instances of the run only (a replaced one), its network stays."""
        ended: list[Instance] = []
        for region in self.records.regions(run_id):
            mine = {i.id for i in self.launcher.describe(region, run_id)}
            here = [i for i in ids if i in mine]  # never anything the run does not own
            if not here:
                continue
            ec2i.terminate_ids(self.clients, region, here, wait_s=self.settings.run.ssh_timeout_s)
            self.ssh.close(here)
            ended += ec2i.describe_ids(self.clients, region, here)
        return ended

    # -------------------------------------------------------------- forget
    def forget(self, run_id: str) -> None:
        """What spotrun keeps of an ended run here and in the cloud (`spotrun rm`): its stored
        files in S3, its SSH key and pinned host keys, its region record. Its instances,
        volumes and security group went when it ended (`spotrun gc` finds any left)."""
        if self.aws.bucket:
            self.store.delete(run_id, self.aws.region)
        shutil.rmtree(self.keys_dir / run_id, ignore_errors=True)
        self.records.forget(run_id)

    # --------------------------------------------------------- data volumes
    def attach_snapshot(self, instance: Instance, snapshot_id: str) -> volumes.DataVolume:
        """A volume made from the snapshot in the instance's zone, tagged as the run's, attached
        to it (the same one again when called again); deleted by `terminate`."""
        region = instance.region or self.run_region(instance.run_id)
        snapshot = volumes.snapshot_in(self.clients, region, snapshot_id)
        made = volumes.ensure_volume(
            self.clients,
            region,
            instance.zone or "",
            snapshot,
            self._volume_tags(instance),
            instance.run_id,
        )
        timeout_s = self.settings.run.ssh_timeout_s
        return volumes.attach(self.clients, region, made, instance.id, timeout_s)

    def instance_storage(self, instance: Instance) -> TypeStorage | None:
        """What the instance's type offers for data (instance store, memory, EBS ceiling)."""
        region = instance.region or self.run_region(instance.run_id)
        return volumes.type_storage(self.clients, region, instance.instance_type)

    @property
    def caches_data(self) -> bool:
        return self.aws.data_cache_volume

    def attach_cache_volume(self, instance: Instance, size_gb: int) -> volumes.CacheAttachment:
        """The run's cache volume for staged data in the instance's zone (the one an earlier
        instance there staged onto, or a new blank one), attached to it; cache volumes of the
        run in other zones are deleted. Deleted by `terminate`."""
        region = instance.region or self.run_region(instance.run_id)
        found = volumes.ensure_cache_volume(
            self.clients,
            region,
            instance.zone or "",
            size_gb,
            self._volume_tags(instance),
            instance.run_id,
        )
        attached = volumes.attach(
            self.clients,
            region,
            found.volume,
            instance.id,
            self.settings.run.ssh_timeout_s,
            volumes.CACHE_DEVICE_NAME,
        )
        return replace(found, volume=attached)

    def _volume_tags(self, instance: Instance) -> list[dict[str, str]]:
        expiry = network.expiry(None, self.aws.expires_after_hours)
        return network.run_tags(instance.run_id, self.settings.owner, expiry)

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
