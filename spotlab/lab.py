"""The lab: an AWS account on loopback whose instances are real SSH hosts.

moto in server mode plays EC2, S3, SSM and STS; boto3 is unchanged and reaches it through
AWS_ENDPOINT_URL (via the lab's front, see front.py). The lab makes a VPC of its own in each of
two regions (regions.py), 127.A.B.0/22 with one /24 subnet per zone, so instances get private
addresses 127.A.x.N, and a watcher pairs every instance of those VPCs with a real sshd host on
its address (hosts.py): the host starts when the instance has booted and is killed, with all
its processes, when the instance is terminated. Each host has an IMDSv2 endpoint (imds.py).

Servers listen on 127.0.0.0/8 only; no network namespaces are made.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from spotlab.capacity import NEW_ACCOUNT, SpotPools, VcpuQuotas
from spotlab.clock import SHIM_DIR
from spotlab.front import CHECKIP_PATH, AwsFront, Fault, Hold
from spotlab.hosts import HOST_HOME, Host, HostSpec
from spotlab.iam import Identity
from spotlab.imds import ROLE, Imds, role_credentials
from spotlab.interruptions import ENDED_AS, notice_before, notice_document
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
from spotlab.s3faults import S3Fault
from spotrun.cloud.aws.policy import controller_stop_policy, instance_policy, user_policy

__all__ = ["OTHER_REGION", "OTHER_ZONES", "REGION", "ZONES", "Lab", "LabNetwork", "MotoServer"]

ACCOUNT = "123456789012"  # moto's
USER = "spotrun-lab-user"  # the IAM user spotrun acts as (its keys: FAKE_CREDENTIALS)
INSTANCE_PROFILE = "spotrun-lab-profile"  # holds ROLE, whose policy is the README's
# `controller up --on aws`'s instance profile: its role holds the README's user policy
CONTROLLER_PROFILE = "spotrun-lab-controller-profile"
CONTROLLER_ROLE = "spotrun-lab-controller-role"
# The user's credentials in the lab: fake (moto takes any) but distinctive, so that a test can
# look for them where they must never be (logs, the ledger, metrics, the instances' files).
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIASPOTRUNLABUSER7Q",
    "AWS_SECRET_ACCESS_KEY": "lab-user-secret-Vq3xK9pLm2ZtR8wNc4HdY6sBf1JgE5uA",
    "AWS_SESSION_TOKEN": "lab-user-session-Tk7Ww2Qe9Rr4Yu1Ii8Oo3Pp6Aa5Ss0Dd",
}

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

# Spot prices the lab starts with (USD/h, per zone a, b, c): a small, realistic market.
DEFAULT_SPOT_PRICES: dict[str, tuple[float, float, float]] = {
    "c6i.large": (0.0312, 0.0334, 0.0298),
    "m6i.large": (0.0391, 0.0402, 0.0388),
    "g4dn.xlarge": (0.2271, 0.2104, 0.2390),
    "g5.xlarge": (0.4431, 0.4122, 0.4587),
    "g6.xlarge": (0.3861, 0.3702, 0.3955),
    "g5.12xlarge": (2.0153, 2.1987, 1.9721),
    "p3.2xlarge": (0.9180, 0.9480, 0.9335),
    "p4d.24xlarge": (11.8101, 12.4030, 11.9020),
}
# The other region's market: a little dearer (per zone a, b), so each region has its own.
OTHER_SPOT_PRICES: dict[str, tuple[float, float]] = {
    t: (round(p[0] * 1.07, 4), round(p[1] * 1.09, 4)) for t, p in DEFAULT_SPOT_PRICES.items()
}


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


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


class MotoServer:
    """One moto server per test process, shared by its labs (each lab has its own VPC)."""

    _shared: MotoServer | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.host, self.port = str(host), int(port)
        self.url = f"http://{self.host}:{self.port}"
        self._clients: dict[tuple[str, str], Any] = {}

    @classmethod
    def shared(cls) -> MotoServer:
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def client(self, service: str, region: str = REGION) -> Any:
        """A client straight to moto (made once: botocore takes a good part of a second)."""
        with self._lock:
            if (service, region) not in self._clients:
                config = Config(
                    region_name=region, retries={"mode": "standard", "total_max_attempts": 3}
                )
                session = boto3.session.Session(
                    aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region
                )
                self._clients[(service, region)] = session.client(  # type: ignore[call-overload]
                    service, endpoint_url=self.url, config=config
                )
            return self._clients[(service, region)]


class Lab:
    """Two EC2 regions on loopback (the home one, REGION, is spotrun's). Use as a context
    manager, or through the `lab` fixture.

    boot: "ssh" (a real sshd answers on each instance), "silent" (the port accepts and never
    sends a banner, as a hung boot), "none" (nothing listens).
    """

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
        self.boot = boot
        self.host_nice = host_nice
        # Seconds the wall clock of hosts booted from now on is off the lab's (spotlab.clock).
        self.host_clock_offset_s = 0.0
        # Seconds from "running" in EC2 (after pending_s) to the host answering SSH: nothing
        # listens on the instance's address before, as on EC2 while it boots (20-60 s there)
        self.boot_s = boot_s
        self._first_seen: dict[str, float] = {}
        self.moto = moto or MotoServer.shared()
        self.id = secrets.token_hex(3)
        self.ec2 = self.moto.client("ec2")  # straight to moto: lab calls see no faults
        self.s3 = self.moto.client("s3")
        self.ssm = self.moto.client("ssm")
        self.hosts: dict[str, Host] = {}
        self.ended_hosts: dict[str, Host] = {}
        self.ssh_port = 0
        self.imds_port = 0
        self.rendezvous_port = 0
        self._imds: dict[str, Imds] = {}
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._sync_lock = threading.RLock()
        self._watcher: threading.Thread | None = None
        self.front = AwsFront(self.moto.host, self.moto.port, self._changed.set)
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
        self.bucket = f"spotrun-lab-{self.id}" if bucket else None
        self.default_prices = default_prices
        self.network: LabNetwork | None = None  # the home region's
        self.networks: dict[str, LabNetwork] = {}  # region -> its network
        self.image_id = ""  # the home region's
        self.image_ids: dict[str, str] = {}  # region -> the image registered there
        self._regions: dict[str, str] = {}  # instance id -> its region
        self.image_parameter = f"/spotrun-lab/{self.id}/ami-id"
        self.errors: list[str] = []  # what went wrong inside the watcher thread
        # (type, zone) -> how many spot instances EC2 can fill there (None: any number)
        self.spot_capacity: dict[tuple[str, str], int] = {}
        self.front.after_run_instances = self._fill
        # EC2's spot pools per (type, zone), `spot_pool` live instances each unless set
        # (spotlab/capacity.py): a RunInstances that does not fit is refused, as EC2 does
        self.spot_pools = SpotPools(spot_pool, self._zone_of_subnet)
        self.spot_pools.live = self._live_spot
        # the account's vCPU quotas, checked before the pools as EC2 does (capacity.py)
        self.vcpu_quotas = VcpuQuotas(
            lambda region: self.client("ec2", region),
            lambda: self.instances(states=("pending", "running")),
            self._region_of_subnet,
        )
        self.front.capacity_refusal = self._launch_refusal
        # IAM enforced by the front (spotlab/iam.py): spotrun acts as a user holding exactly
        # the README's user policy, instances as the README's instance role.
        self.front.iam.enabled = iam
        self.front.iam.tags_of = self._tags_of
        self.front.iam.bucket_exists = self._bucket_exists

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
        self.ssh_port = free_port(self._address(1))
        self.imds_port = free_port(self._address(1))
        self.rendezvous_port = free_port()
        if self.bucket:
            self.s3.create_bucket(Bucket=self.bucket)
        if self.default_prices:
            start = time.time() - 6 * 3600
            for instance_type, prices in DEFAULT_SPOT_PRICES.items():
                for zone, price in zip(ZONES, prices):
                    self.set_spot_prices(instance_type, zone, [(start, price)])
            for instance_type, other in OTHER_SPOT_PRICES.items():
                for zone, price in zip(OTHER_ZONES, other):
                    self.set_spot_prices(instance_type, zone, [(start, price)])
        self._make_identities()
        self._watcher = threading.Thread(target=self._watch, name=f"lab-{self.id}", daemon=True)
        self._watcher.start()
        return self

    def _make_identities(self) -> None:
        """The user spotrun runs as and the instance role, with the policies the README gives."""
        iam = self.moto.client("iam")
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "ec2.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        bucket = self.bucket or f"spotrun-lab-{self.id}-no-bucket"
        # Labs side by side share moto's one account: the first makes these, the others find them.
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps(trust))
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_instance_profile(InstanceProfileName=INSTANCE_PROFILE)
        with contextlib.suppress(iam.exceptions.LimitExceededException):  # holds it already
            iam.add_role_to_instance_profile(InstanceProfileName=INSTANCE_PROFILE, RoleName=ROLE)
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_role(RoleName=CONTROLLER_ROLE, AssumeRolePolicyDocument=json.dumps(trust))
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_instance_profile(InstanceProfileName=CONTROLLER_PROFILE)
        with contextlib.suppress(iam.exceptions.LimitExceededException):
            iam.add_role_to_instance_profile(
                InstanceProfileName=CONTROLLER_PROFILE, RoleName=CONTROLLER_ROLE
            )
        role_arn = f"arn:aws:iam::{ACCOUNT}:role/{ROLE}"
        self.role_policy = instance_policy(bucket, bucket)
        self.user_policy = user_policy(bucket, bucket, ROLE, CONTROLLER_ROLE)
        self.front.iam.profiles[INSTANCE_PROFILE] = role_arn
        self.front.iam.profiles[CONTROLLER_PROFILE] = (
            f"arn:aws:iam::{ACCOUNT}:role/{CONTROLLER_ROLE}"
        )
        self.front.iam.add(
            FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            Identity(f"arn:aws:iam::{ACCOUNT}:user/{USER}", (self.user_policy,)),
        )

    def _credentials_reader(self, instance_id: str) -> Callable[[], dict[str, str] | None]:
        """What the instance's IMDS serves as role credentials: its session once EC2 says the
        instance has a profile (moto attaches it a moment after the instance appears)."""
        session: list[dict[str, str]] = []

        def read() -> dict[str, str] | None:
            if not session and self._has_profile(instance_id):
                session.append(self._session_of(instance_id))
            return session[0] if session else None

        return read

    def client(self, service: str, region: str = REGION) -> Any:
        """A boto3 client straight to moto in `region` (no faults, no IAM), for assertions."""
        return self.moto.client(service, region)

    def region_of(self, instance_id: str) -> str:
        """The region an instance of the lab's lives in."""
        if instance_id not in self._regions:
            self.instances()  # learns every instance's region
        return self._regions.get(instance_id, REGION)

    def _has_profile(self, instance_id: str) -> bool:
        if instance_id in self.front.instance_profiles:
            return True
        ec2 = self.client("ec2", self.region_of(instance_id))
        try:
            found = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        except ClientError:
            return False
        return any(i.get("IamInstanceProfile") for r in found for i in r["Instances"])

    def _session_of(self, instance_id: str) -> dict[str, str]:
        """The role session of an instance launched with one of the lab's profiles, known to
        the front: a run's role, or the controller's (the user policy: it launches runs)."""
        credentials = role_credentials(instance_id)
        policies: tuple[dict[str, Any], ...]
        if self._profile_of(instance_id) == CONTROLLER_PROFILE:
            role, policies = CONTROLLER_ROLE, (self.user_policy, controller_stop_policy())
        else:
            role, policies = ROLE, (self.role_policy,)
        self.front.iam.add(
            credentials["AccessKeyId"],
            Identity(
                f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{instance_id}",
                policies,
                instance_id=instance_id,
            ),
        )
        return credentials

    def _profile_of(self, instance_id: str) -> str | None:
        if instance_id in self.front.instance_profiles:
            return self.front.instance_profiles[instance_id]
        ec2 = self.client("ec2", self.region_of(instance_id))
        found = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        for item in (i for r in found for i in r["Instances"]):
            arn = str((item.get("IamInstanceProfile") or {}).get("Arn", ""))
            return arn.rsplit("/", 1)[-1] or None
        return None

    def _bucket_exists(self, bucket: str) -> bool:
        try:
            self.s3.head_bucket(Bucket=bucket)
        except ClientError:
            return False
        return True

    def _tags_of(self, region: str, kind: str, resource_id: str) -> dict[str, str] | None:
        """An EC2 resource's tags in `region` as moto (or the front, for placement groups)
        holds them."""
        if kind == "placement-group":
            group = self.front.placement.groups.get(resource_id)
            if group is None or group["region"] != region:
                return None
            return dict(group["tags"])  # type: ignore[call-overload]
        calls: dict[str, tuple[str, dict[str, Any], str]] = {
            "instance": ("describe_instances", {"InstanceIds": [resource_id]}, "Reservations"),
            "volume": ("describe_volumes", {"VolumeIds": [resource_id]}, "Volumes"),
            "security-group": (
                "describe_security_groups",
                {"GroupIds": [resource_id]},
                "SecurityGroups",
            ),
            "key-pair": ("describe_key_pairs", {"KeyNames": [resource_id]}, "KeyPairs"),
            "spot-instances-request": (
                "describe_spot_instance_requests",
                {"SpotInstanceRequestIds": [resource_id]},
                "SpotInstanceRequests",
            ),
        }
        method, args, field_name = calls[kind]
        try:
            found = getattr(self.client("ec2", region), method)(**args)[field_name]
        except ClientError:
            return None  # EC2 knows no such resource
        if kind == "instance":
            found = [i for r in found for i in r["Instances"]]
        if not found:
            return None
        return {t["Key"]: t["Value"] for t in found[0].get("Tags", [])}

    def _address(self, host: int) -> str:
        assert self.network is not None
        return self.network.cidr.replace("0/22", str(host))

    # ------------------------------------------------------ what spotrun sees
    def env(self) -> dict[str, str]:
        """Environment for spotrun processes: boto3 reaches the lab, and nothing else."""
        return {
            "AWS_ENDPOINT_URL": self.front.url,
            "AWS_DEFAULT_REGION": REGION,
            **FAKE_CREDENTIALS,
            "AWS_EC2_METADATA_DISABLED": "true",  # this machine is no instance
            "AWS_CONFIG_FILE": str(self.root / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.root / "no-aws-credentials"),
        }

    def settings(self, **overrides: Any) -> dict[str, Any]:
        """The [aws] settings that point spotrun at the lab."""
        assert self.network is not None
        aws: dict[str, Any] = {
            "region": REGION,
            "image_ssm_parameter": self.image_parameter,
            # both regions' subnets: a launch uses those of its region
            "subnet_ids": [n.subnets[z] for n in self.networks.values() for z in n.subnets],
            "regions": list(REGIONS),  # where gc looks
            "ssh_address": "private",
            # Asked only with ssh_address = "public": the front answers as checkip would.
            "caller_ip_url": self.front.url + CHECKIP_PATH,
            "ssh_user": "root",
            "ssh_port": self.ssh_port,
            "ssh_timeout_s": 30.0,
            "python": sys.executable,
            "root_volume_gb": 30,
            "poll_s": 1.0,
            "max_attempts": 4,
            # torch's rendezvous store listens on every address of this machine: a port of the
            # lab's own, not torch's usual 29400 that other labs and torchruns here take too
            "rendezvous_port": self.rendezvous_port,
            # instances get the role's credentials only through a profile, as on EC2
            "instance_profile": INSTANCE_PROFILE,
            "controller_instance_profile": CONTROLLER_PROFILE,
            "gpu_mismatch": "warn",  # the lab offers GPU types on hosts that have no GPU
        }
        if self.bucket:
            aws["bucket"] = self.bucket
        aws.update(overrides)
        return aws

    def write_config(self, home: Path, **overrides: Any) -> Path:
        home.mkdir(parents=True, exist_ok=True)
        settings = self.settings(**overrides)
        # a None override leaves the key out (spotrun's default: e.g. no instance profile)
        lines = ["[aws]"] + [f"{k} = {_toml(v)}" for k, v in settings.items() if v is not None]
        path = home / "config.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    @contextmanager
    def environ(self) -> Iterator[None]:
        """This process's os.environ pointed at the lab (for in-process provider calls)."""
        saved = {k: os.environ.get(k) for k in self.env()}
        os.environ.update(self.env())
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    # ------------------------------------------------------------- market
    def set_spot_prices(
        self, instance_type: str, zone: str, points: list[tuple[float, float]]
    ) -> None:
        """The spot price history of a type in a zone: [(unix time, USD/h), ...].

        Once any history is set, DescribeSpotPriceHistory is answered from the lab's histories
        only (a type without one has no spot market in the lab).
        """
        self.front.spot_prices.set(instance_type, zone, points)

    def set_on_demand_price(
        self, instance_type: str, usd_per_hour: float, region: str = REGION
    ) -> None:
        """Answer the Pricing API for this type (until one is set, it answers AccessDenied)."""
        self.front.on_demand.prices[(region, instance_type)] = usd_per_hour

    def fail(
        self,
        action: str,
        code: str,
        *,
        times: int | None = 1,
        zone: str | None = None,
        instance_type: str | None = None,
        message: str | None = None,
        status: int | None = None,
    ) -> Fault:
        """Answer the next `times` EC2 `action` calls (None: all) with error `code`."""
        assert self.network is not None
        match = {}
        if zone is not None:
            match["SubnetId"] = self.networks[region_of_zone(zone)].subnets[zone]
        if instance_type is not None:
            match["InstanceType"] = instance_type
        return self.front.faults.add(
            action, code, times=times, message=message, status=status, zone=zone, match=match
        )

    def fail_s3(self, operation: str, code: str = "SlowDown", *, times: int = 1) -> S3Fault:
        """Answer the next `times` S3 `operation` calls (PutObject, UploadPart, GetObject...)
        with S3's `code`: SlowDown (503) or InternalError (500)."""
        return self.front.s3_faults.add(operation, code, times=times)

    def delay_response(self, action: str, seconds: float, times: int = 1) -> None:
        """Let EC2 act on `action`, but hold its answer `seconds` (the next `times` calls).

        While the answer is held the instances exist and the caller has not heard of them:
        kill the caller then, and it is the crash a reconciling launch must survive.
        """
        self.front.delays[action] = [seconds, times]

    def hold(self, action: str, *, forwarded: bool = False) -> Hold:
        """Hold the next EC2 `action` call until `.release()` (see front.Hold): a fault can be
        timed to land while spotrun waits on that call."""
        return self.front.holds.add(action, forwarded=forwarded)

    # ---------------------------------------------------------- instances
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

    def host(self, instance_id: str) -> Host:
        """The host of a live instance (or of an ended one, for a look at its files)."""
        with self._sync_lock:
            found = self.hosts.get(instance_id) or self.ended_hosts.get(instance_id)
        if found is None:
            raise KeyError(f"the lab has no host for {instance_id}")
        return found

    def wait_for_host(self, instance_id: str, timeout_s: float = 10.0) -> Host:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._sync_lock:
                if instance_id in self.hosts:
                    return self.hosts[instance_id]
            self._changed.set()
            time.sleep(0.02)
        raise TimeoutError(f"no host came up for {instance_id}")

    def replace_host_key(self, instance_id: str) -> str:
        """Restart the instance's host with a new host key (a different machine answering)."""
        host = self.host(instance_id)
        host.restart(new_host_key=True)
        return host.host_key_public

    def interrupt(
        self, instance_id: str, notice_s: float | None = None, action: str | None = None
    ) -> None:
        """A spot interruption: the notice in IMDS now, EC2 acting on it after `notice_s` (the
        two minutes scaled by time_scale unless given; none for hibernation, which EC2 begins
        at once). `action`: what EC2 does, by default what the instance's request asked
        (InstanceInterruptionBehavior; terminate)."""
        if action is None:
            spot = self.front.spot_requests.get(instance_id)
            action = spot.behaviour if spot is not None else "terminate"
        if notice_s is None:
            notice_s = notice_before(action) * self.time_scale
        imds = self._imds.get(instance_id)
        now = imds.now() if imds is not None else time.time()  # in the instance's own frame
        document = notice_document(action, now + notice_s)
        if imds is not None:
            imds.announce("meta-data/spot/instance-action", document)
        timer = threading.Timer(notice_s, self.reclaim, args=(instance_id, action))
        timer.daemon = True
        timer.start()

    def reclaim(self, instance_id: str, action: str = "terminate") -> None:
        """EC2 takes the spot instance back now: terminated, or with action "stop" or
        "hibernate" stopped (its volumes kept, and billed), with EC2's spot StateReason; the
        host is killed either way."""
        from moto.ec2.models import ec2_backends
        from moto.ec2.models.instances import StateReason

        code, message = ENDED_AS[action]
        backend = ec2_backends[ACCOUNT][self.region_of(instance_id)]
        instance = backend.get_instance(instance_id)
        if action == "terminate":
            backend.terminate_instances([instance_id])
        else:
            backend.stop_instances([instance_id])
        ending = "TerminateInstances" if action == "terminate" else "StopInstances"
        self.front.consistency.ended_by(ending, [instance_id])
        stamp = datetime.now(tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S GMT")
        instance._reason = f"Service initiated ({stamp})"
        instance.state_reason = StateReason(message, code)
        self.sync()

    def set_spot_capacity(self, instance_type: str, zone: str, count: int | None) -> None:
        """The spot pool of `instance_type` in `zone`: `count` live instances (0: none; None:
        no limit). A spot RunInstances that does not fit is answered with EC2's
        InsufficientInstanceCapacity, naming the type and zone; nothing is made."""
        self.spot_pools.sizes[(instance_type, zone)] = count

    def set_vcpu_quota(self, code: str, vcpus: float | None, *, readable: bool = True) -> None:
        """The account's vCPU quota `code` (Service Quotas' code): RunInstances refuses what
        would pass it, as EC2 does (None: no limit). `readable`: GetServiceQuota answers it
        (otherwise as for an account without servicequotas permissions)."""
        if vcpus is None:
            self.vcpu_quotas.limits.pop(code, None)
            self.front.quotas.values.pop(code, None)
            return
        self.vcpu_quotas.limits[code] = vcpus
        if readable:
            self.front.quotas.values[code] = vcpus
        else:
            self.front.quotas.values.pop(code, None)

    def new_account(self, *, readable: bool = False) -> None:
        """A new AWS account's vCPU quotas: 0 for every GPU family, spot and on-demand, 5 for
        Standard (AWS's instance type quotas page)."""
        for code, vcpus in NEW_ACCOUNT.items():
            self.set_vcpu_quota(code, vcpus, readable=readable)

    def _launch_refusal(self, params: dict[str, str]) -> tuple[int, bytes] | None:
        return self.vcpu_quotas.refusal(params) or self.spot_pools.refusal(params)

    def _region_of_subnet(self, subnet_id: str) -> str | None:
        zone = self._zone_of_subnet(subnet_id)
        return region_of_zone(zone) if zone else None

    def _zone_of_subnet(self, subnet_id: str) -> str | None:
        zones = (z for n in self.networks.values() for z, s in n.subnets.items() if s == subnet_id)
        return next(zones, None)

    def _live_spot(self, instance_type: str, zone: str) -> int:
        return sum(
            1
            for i in self.instances(states=("pending", "running"))
            if i.get("InstanceLifecycle") == "spot"
            and (i["InstanceType"], i["Placement"]["AvailabilityZone"]) == (instance_type, zone)
        )

    def limit_spot_capacity(self, instance_type: str, zone: str, count: int) -> None:
        """Spot capacity for only `count` live instances of the type in the zone: instances
        launched beyond it end at once with EC2's Server.InsufficientInstanceCapacity (a
        partial fill of a RunInstances call)."""
        self.spot_capacity[(instance_type, zone)] = count

    def _fill(self, answer: bytes) -> None:
        import re

        if not self.spot_capacity:
            return
        made = re.findall(rb"<instanceId>(i-[0-9a-f]+)</instanceId>", answer)
        for raw in made:
            instance_id = raw.decode()
            ec2 = self.client("ec2", self.region_of(instance_id))
            (item,) = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0][
                "Instances"
            ]
            key = (item["InstanceType"], item["Placement"]["AvailabilityZone"])
            limit = self.spot_capacity.get(key)
            if limit is None:
                continue
            live = [
                i
                for i in self.instances(states=("pending", "running"))
                if (i["InstanceType"], i["Placement"]["AvailabilityZone"]) == key
            ]
            if len(live) > limit:
                self._end_as(
                    instance_id,
                    "Server.InsufficientInstanceCapacity",
                    "Server.InsufficientInstanceCapacity: Insufficient capacity",
                )

    def _end_as(self, instance_id: str, code: str, message: str) -> None:
        from moto.ec2.models import ec2_backends
        from moto.ec2.models.instances import StateReason

        backend = ec2_backends[ACCOUNT][self.region_of(instance_id)]
        instance = backend.get_instance(instance_id)
        backend.terminate_instances([instance_id])
        stamp = datetime.now(tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S GMT")
        instance._reason = f"Service initiated ({stamp})"
        instance.state_reason = StateReason(message, code)

    def announce_rebalance(self, instance_id: str) -> None:
        imds = self._imds.get(instance_id)
        if imds is not None:
            stamp = datetime.now(tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            imds.announce(
                "meta-data/events/recommendations/rebalance", json.dumps({"noticeTime": stamp})
            )

    def imds(self, instance_id: str) -> Imds:
        return self._imds[instance_id]

    # ------------------------------------------------------------ watcher
    def _watch(self) -> None:
        while not self._stop.is_set():
            self._changed.wait(timeout=0.5)
            self._changed.clear()
            if self._stop.is_set():
                break
            try:
                self.sync()
            except Exception as exc:  # the watcher must outlive one bad poll; tests see errors
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def sync(self) -> None:
        """Start hosts for new instances, kill hosts of ended ones."""
        with self._sync_lock:
            for item in self.instances():
                instance_id = item["InstanceId"]
                state = item["State"]["Name"]
                if state in ("pending", "running") and instance_id not in self.hosts:
                    if instance_id in self.ended_hosts:
                        # stopped, then started again (a terminated one never runs again):
                        # the same machine boots, its files (the EBS root volume) kept
                        if state == "running":
                            self._start_host(item, again=self.ended_hosts.pop(instance_id))
                    elif self._booted(instance_id):
                        self._start_host(item)
                elif state not in ("pending", "running") and instance_id in self.hosts:
                    self._end_host(instance_id)

    def _booted(self, instance_id: str) -> bool:
        """Whether the instance has booted: pending, then running for boot_s."""
        boot_s = self.boot_s + self.front.consistency.pending_s
        if boot_s <= 0:
            return True
        born = self.front.consistency.born.get(instance_id)  # when RunInstances made it
        seen = self._first_seen.setdefault(instance_id, time.monotonic() if born is None else born)
        left = seen + boot_s - time.monotonic()
        if left > 0:
            timer = threading.Timer(left, self._changed.set)
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
            imds = Imds(
                address,
                self.imds_port,
                instance_id=instance_id,
                instance_type=item["InstanceType"],
                zone=item["Placement"]["AvailabilityZone"],
                region=region,
                ami_id=item["ImageId"],
                credentials=self._credentials_reader(instance_id),
                clock_offset_s=self.host_clock_offset_s,
            )
            self._imds[instance_id] = imds
        env = {"AWS_ENDPOINT_URL": self.front.url, "AWS_DEFAULT_REGION": region}
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
            nice=self.host_nice,
            clock_offset_s=self.host_clock_offset_s,
        )
        host = again or Host(spec, self.root / "hosts" / instance_id, mode=self.boot)
        if self.boot != "none":
            host.start(boot_again=again is not None)
        self.hosts[instance_id] = host

    def _end_host(self, instance_id: str) -> None:
        host = self.hosts.pop(instance_id)
        host.stop()
        imds = self._imds.pop(instance_id, None)
        if imds is not None:
            imds.stop()
        self.ended_hosts[instance_id] = host

    # ----------------------------------------------------------- tear down
    def close(self) -> None:
        """Terminate the lab's instances, kill every host, stop the servers."""
        self._stop.set()
        self._changed.set()
        if self._watcher is not None:
            self._watcher.join(timeout=10)
        with self._sync_lock:
            live = [i["InstanceId"] for i in self.instances(states=("pending", "running"))]
            for region in self.networks:
                ids = [i for i in live if self._regions.get(i) == region]
                if ids:
                    self.client("ec2", region).terminate_instances(InstanceIds=ids)
            for instance_id in list(self.hosts):
                self._end_host(instance_id)
        self.front.stop()

    def __enter__(self) -> Lab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")
