"""The lab: an AWS account on loopback whose instances are real SSH hosts.

moto in server mode plays EC2, S3, SSM and STS; boto3 is unchanged and reaches it through
AWS_ENDPOINT_URL (via the lab's front, see front.py). The lab makes a VPC of its own in each of
two regions (regions.py), 127.A.B.0/22 with one /24 subnet per zone, so instances get private
addresses 127.A.x.N. `Lab` is the facade; its facets do the work, one job each:

- lab.hosts: a real sshd host per instance, with its IMDS (lab_hosts.py)
- lab.iam: the user spotrun acts as and the instance roles (lab_iam.py)
- lab.config: the environment and [aws] settings that point spotrun at the lab (lab_config.py)
- lab.prices: spot price histories and on-demand prices (lab_prices.py)
- lab.capacity: spot pools, vCPU quotas, partial fills (lab_capacity.py)
- lab.faults: EC2 and S3 errors, answers delayed or held (lab_faults.py)
- lab.interruptions: spot notices, reclaims, rebalance recommendations (lab_interruptions.py)

Servers listen on 127.0.0.0/8 only; no network namespaces are made.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

from spotlab.front import AwsFront
from spotlab.lab_capacity import LabCapacity
from spotlab.lab_config import LabConfig
from spotlab.lab_faults import LabFaults
from spotlab.lab_hosts import LabHosts, image_paths
from spotlab.lab_iam import (
    ACCOUNT,
    CONTROLLER_PROFILE,
    CONTROLLER_ROLE,
    FAKE_CREDENTIALS,
    INSTANCE_PROFILE,
    USER,
    LabIam,
)
from spotlab.lab_interruptions import LabInterruptions
from spotlab.lab_prices import DEFAULT_SPOT_PRICES, OTHER_SPOT_PRICES, LabPrices
from spotlab.moto_server import MotoServer, free_port
from spotlab.regions import (
    OTHER_REGION,
    OTHER_ZONES,
    REGION,
    REGIONS,
    ZONES,
    LabNetwork,
    draw_block,
    make_network,
    region_of_zone,
)

__all__ = [
    "ACCOUNT",
    "CONTROLLER_PROFILE",
    "CONTROLLER_ROLE",
    "DEFAULT_SPOT_PRICES",
    "EC2_WAITS",
    "FAKE_CREDENTIALS",
    "INSTANCE_PROFILE",
    "OTHER_REGION",
    "OTHER_SPOT_PRICES",
    "OTHER_ZONES",
    "REGION",
    "USER",
    "ZONES",
    "Lab",
    "LabNetwork",
    "MotoServer",
    "free_port",
    "image_paths",
]

# EC2's own waits, unscaled, for a bench that wants them (Lab(**EC2_WAITS)): ids unknown for
# a couple of seconds after RunInstances, pending for tens of seconds, SSH after the OS boots
# (EC2 publishes no figures; these are typical of a GPU instance), the notice's full two
# minutes. The lab's defaults are these scaled down for tests.
EC2_WAITS: dict[str, float] = {
    "not_found_s": 2.0,
    "resource_not_found_s": 2.0,
    "shutting_down_s": 30.0,
    "pending_s": 15.0,
    "boot_s": 30.0,
    "time_scale": 1.0,
}
LIVE = ("pending", "running")


class Lab:
    """Two EC2 regions on loopback (the home one, REGION, is spotrun's). Use as a context
    manager, or through the `lab` fixture. `boot`: see LabHosts."""

    def __init__(
        self,
        root: Path,
        *,
        boot: str = "ssh",
        bucket: bool = True,
        default_prices: bool = True,
        host_nice: int = 0,
        boot_s: float = 1.0,
        moto: MotoServer | None = None,
        not_found_s: float = 0.5,
        pending_s: float = 0.5,
        resource_not_found_s: float = 0.0,
        shutting_down_s: float = 0.0,
        client_tokens: bool = True,
        iam: bool = True,
        time_scale: float = 1 / 15,
        spot_pool: int | None = 8,
    ) -> None:
        self.root = root
        # Real seconds per EC2 second for what EC2 times itself: the notice's two minutes
        # (EC2_NOTICE_S) last 120 * time_scale seconds here (8 s by default).
        self.time_scale = time_scale
        self.moto = moto or MotoServer.shared()
        self.id = secrets.token_hex(3)
        self.ec2 = self.moto.client("ec2")  # straight to moto: lab calls see no faults
        self.s3 = self.moto.client("s3")
        self.ssm = self.moto.client("ssm")
        self.rendezvous_port = 0
        self.bucket = f"spotrun-lab-{self.id}" if bucket else None
        self.default_prices = default_prices
        self.network: LabNetwork | None = None  # the home region's
        self.networks: dict[str, LabNetwork] = {}  # region -> its network
        self.image_id = ""  # the home region's
        self.image_ids: dict[str, str] = {}  # region -> the image registered there
        self._regions: dict[str, str] = {}  # instance id -> its region
        self.image_parameter = f"/spotrun-lab/{self.id}/ami-id"
        # the front tells the hosts' watcher the moment instances were made or ended
        self.front = AwsFront(self.moto.host, self.moto.port, lambda: self.hosts.changed.set())
        self.hosts = LabHosts(
            root,
            self.front.consistency,
            self.instances,
            self.client,
            boot=boot,
            boot_s=boot_s,
            nice=host_nice,
        )
        # EC2's eventual consistency, pending state and ClientToken (spotlab/consistency.py),
        # on by default with windows scaled for tests (EC2's are seconds to tens of seconds)
        self.front.consistency.not_found_s = not_found_s
        self.front.consistency.pending_s = pending_s
        self.front.consistency.tokens = client_tokens
        # the same for security groups, key pairs and volumes (off unless a test asks)
        self.front.consistency.resource_not_found_s = resource_not_found_s
        # an ending instance is described shutting-down (terminate) or stopping (stop) first
        self.front.consistency.shutting_down_s = shutting_down_s
        self.front.consistency.stopping_s = shutting_down_s
        # IAM enforced by the front (spotlab/iam.py): spotrun acts as a user holding exactly
        # the README's user policy, instances as the README's instance role.
        self.iam = LabIam(
            self.front,
            self.client,
            self.region_of,
            self.bucket or f"spotrun-lab-{self.id}-no-bucket",
            enabled=iam,
        )
        self.hosts.credentials = self.iam.credentials_reader
        self.hosts.endpoint_url = self.front.url
        self.config = LabConfig(self)
        self.prices = LabPrices(self.front)
        self.capacity = LabCapacity(
            self.front,
            self.client,
            self.instances,
            self._zone_of_subnet,
            self.region_of,
            spot_pool,
        )
        self.faults = LabFaults(self.front, self._subnet_of_zone)
        self.interruptions = LabInterruptions(
            self.front,
            self.hosts.imds_of,
            self.region_of,
            self.hosts.sync,
            lambda: self.time_scale,
        )

    # ------------------------------------------------------------- set up
    def start(self) -> Lab:
        self.root.mkdir(parents=True, exist_ok=True)
        self.front.start()
        a, b = draw_block()
        for n, region in enumerate(REGIONS):
            self.networks[region] = make_network(self.client("ec2", region), region, a, b + 4 * n)
            image = self.client("ec2", region).register_image(
                Name=f"spotrun-lab-{self.id}",
                Architecture="x86_64",
                RootDeviceName="/dev/sda1",
                VirtualizationType="hvm",
                BlockDeviceMappings=[{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 8}}],
            )
            self.image_ids[region] = image["ImageId"]
            # one parameter name in every region, as AWS's public image parameters are
            self.client("ssm", region).put_parameter(
                Name=self.image_parameter, Value=image["ImageId"], Type="String", Overwrite=True
            )
        self.network, self.image_id = self.networks[REGION], self.image_ids[REGION]
        self.hosts.ssh_port = free_port(self._address(1))
        self.hosts.imds_port = free_port(self._address(1))
        self.rendezvous_port = free_port()
        if self.bucket:
            self.s3.create_bucket(Bucket=self.bucket)
        if self.default_prices:
            self.prices.set_defaults(since=time.time() - 6 * 3600)
        self.iam.make_identities()
        self.hosts.start(name=f"lab-{self.id}")
        return self

    # ------------------------------------------------------ the account
    def client(self, service: str, region: str = REGION) -> Any:
        """A boto3 client straight to moto in `region` (no faults, no IAM), for assertions."""
        return self.moto.client(service, region)

    def instances(
        self, run_id: str | None = None, states: tuple[str, ...] | None = None
    ) -> list[dict[str, Any]]:
        """The lab VPCs' instances as EC2 describes them (optionally one run's), the home
        region's first."""
        found = []
        for region, network in self.networks.items():
            filters = [{"Name": "vpc-id", "Values": [network.vpc_id]}]
            if run_id:
                filters.append({"Name": "tag:spotrun:run-id", "Values": [run_id]})
            if states:
                filters.append({"Name": "instance-state-name", "Values": list(states)})
            ec2 = self.client("ec2", region)
            reservations = ec2.describe_instances(Filters=filters)["Reservations"]
            for item in (i for r in reservations for i in r["Instances"]):
                self._regions[item["InstanceId"]] = region
                found.append(item)
        return found

    def region_of(self, instance_id: str) -> str:
        """The region an instance of the lab's lives in."""
        if instance_id not in self._regions:
            self.instances()  # learns every instance's region
        return self._regions.get(instance_id, REGION)

    @property
    def errors(self) -> list[str]:
        """What went wrong inside the hosts' watcher thread."""
        return self.hosts.errors

    def _zone_of_subnet(self, subnet_id: str) -> str | None:
        zones = (z for n in self.networks.values() for z, s in n.subnets.items() if s == subnet_id)
        return next(zones, None)

    def _subnet_of_zone(self, zone: str) -> str:
        return self.networks[region_of_zone(zone)].subnets[zone]

    def _address(self, host: int) -> str:
        assert self.network is not None
        return self.network.cidr.replace("0/22", str(host))

    # ----------------------------------------------------------- tear down
    def close(self) -> None:
        """Terminate the lab's instances, kill every host, stop the servers."""
        self.hosts.stop_watching()
        live = [i["InstanceId"] for i in self.instances(states=LIVE)]
        for region in self.networks:
            ids = [i for i in live if self._regions.get(i) == region]
            if ids:
                self.client("ec2", region).terminate_instances(InstanceIds=ids)
        self.hosts.end_all()
        self.front.stop()

    def __enter__(self) -> Lab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
