"""Launching a run's instances, and finding them again, by the run's tags.

`launch` reconciles: it counts what the run already has live (less the instances being
replaced) and asks EC2 for the shortfall only, with a client token that makes a retried call
the same request. The key pair and security group are made (or found) first, in parallel; a
cluster gets traffic allowed within its group and, where the type can join one, a cluster
placement group. A cluster runs on all its nodes or not at all.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from spotrun.cloud.aws import instances as ec2i
from spotrun.cloud.aws import network, placement
from spotrun.cloud.aws.context import LaunchContext
from spotrun.cloud.aws.region_records import RegionRecords
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.base import Instance, InstanceRequest
from spotrun.core.config import Settings
from spotrun.core.errors import CapacityError, UsageError

log = logging.getLogger(__name__)


class RunLaunch:
    def __init__(
        self,
        settings: Settings,
        clients: AwsClients,
        context: LaunchContext,
        records: RegionRecords,
        keys_dir: Path,
    ) -> None:
        self.settings = settings
        self.aws = settings.aws
        self.clients = clients
        self.context = context
        self.records = records
        self.keys_dir = keys_dir

    def describe(self, region: str, run_id: str) -> list[Instance]:
        """The run's instances in `region`, those RunInstances just made included."""
        # Only instances made within aws.consistency_s can be missing from the listing for
        # want of consistency; an older one missing from it is gone.
        now = time.time()
        made = self.records.made(run_id, region).items()
        fresh = [i for i, at in made if now - at < self.aws.consistency_s]
        return ec2i.describe_run(self.clients, region, run_id, fresh)

    def launch(self, request: InstanceRequest) -> list[Instance]:
        offer = request.offer
        region = offer.region
        self.records.remember(request.run_id, region)
        known = self.describe(region, request.run_id)
        live = [i for i in known if i.is_live and i.id not in request.replacing]
        shortfall = request.count - len(live)
        if shortfall <= 0:
            return live
        subnets = self.context.subnets(region)
        if offer.zone not in subnets:
            raise UsageError(f"spotrun has no subnet in {offer.zone}")
        subnet = subnets[offer.zone]
        token = ec2i.client_token(request.run_id, offer, len(known))
        expires = self.records.expiry(
            request.run_id,
            token,
            lambda: network.expiry(request.max_hours, self.aws.expires_after_hours),
        )
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
            self.records.remember(request.run_id, region, placement_group=True)
            group_name = placement.ensure_cluster_group(
                self.clients, region, offer.zone, request.run_id, tags
            )
        params = ec2i.run_instances_params(
            run_id=request.run_id,
            offer=offer,
            count=shortfall,
            image=self.context.image(region),
            subnet_id=subnet.id,
            security_group_id=group_id,
            key_name=key_name,
            disk_gb=request.disk_gb or self.settings.run.root_volume_gb,
            tags=tags,
            token=token,
            public_address=self.aws.ssh_address == "public",
            instance_profile=self.aws.instance_profile,
            placement_group=group_name,
            efa=cluster and offer.efa,
            metadata_hop_limit=self.aws.metadata_hop_limit,
        )
        made = ec2i.run_instances(self.clients, region, params)
        self.records.remember_made(request.run_id, [str(i["InstanceId"]) for i in made])
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
        ec2i.terminate_ids(self.clients, region, live, wait_s=self.settings.run.ssh_timeout_s)
        why = "; ".join(f"{i.id} ended at once: {i.state_reason or i.state}" for i in ended)
        offer = request.offer
        raise CapacityError(
            f"partial fill: EC2 started {len(made) - len(ended)} of {wanted} "
            f"{offer.instance_type} in {offer.zone}"
            + (f" ({why})" if why else "")
            + f"; terminated {', '.join(live) or 'nothing'} at once, nothing is left billing"
        )
