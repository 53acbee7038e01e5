"""`spotrun doctor`: what a first AWS launch needs, checked before anything is created.

Each check asks AWS the way a launch would (read-only calls, or EC2's DryRun, which answers
DryRunOperation when the call would have been allowed) and says what to do when it fails.
Nothing is made: DryRun creates nothing, and the key pair offered to it is a throwaway.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from spotrun.cloud.aws import instances as ec2i
from spotrun.cloud.aws import network as ec2_network
from spotrun.cloud.aws.checkpoints import check_bucket
from spotrun.cloud.aws.errors import aws_call, error_code
from spotrun.cloud.aws.policy import INSTANCE_ACTIONS
from spotrun.cloud.aws.quota_table import QUOTAS, VcpuQuota, family_group, increase_hint
from spotrun.cloud.aws.quotas import QuotaReading, read_quota
from spotrun.cloud.base import Offer
from spotrun.core.config import Resources
from spotrun.core.errors import SpotrunError
from spotrun.core.money import show_usd_per_hour

Status = Literal["ok", "warn", "fail", "skip"]
README_POLICY = "the user policy in docs/permissions.md"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""  # what to do, when not ok
    rows: tuple[str, ...] = ()  # details shown below the check (the quotas per family)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rows": list(self.rows)}


class Doctor:
    """Runs the checks in order; a check that a failed one makes meaningless is skipped."""

    def __init__(self, provider: Any, resources: Resources) -> None:
        self.provider = provider  # an AwsProvider (typed loosely: cloud.aws.provider imports us)
        self.aws = provider.aws
        self.region: str = provider.aws.region
        self.resources = resources  # what the first launch will ask for
        self.offer: Offer | None = None
        self.found: list[Offer] = []  # every spot offer of the first launch
        self.checks: list[Check] = []

    def run(self) -> list[Check]:
        steps: list[tuple[str, Callable[[], Check], tuple[str, ...]]] = [
            ("credentials", self.credentials, ()),
            ("region", self.region_enabled, ("credentials",)),
            ("image", self.image, ("region",)),
            ("network", self.network, ("region",)),
            ("spot offers", self.offers, ("network",)),
            ("launch permissions", self.launch_permissions, ("image", "spot offers")),
            ("vCPU quota", self.quota, ("spot offers",)),
            ("bucket", self.bucket, ("credentials",)),
            ("instance profile", self.instance_profile, ("credentials",)),
        ]
        passed: set[str] = set()
        for name, step, needs in steps:
            missing = [n for n in needs if n not in passed]
            if missing:
                check = Check(name, "skip", f"not checked: '{missing[0]}' failed first")
            else:
                check = self._guarded(name, step)
            if check.status in ("ok", "warn"):
                passed.add(name)
            self.checks.append(check)
        return self.checks

    def _guarded(self, name: str, step: Callable[[], Check]) -> Check:
        try:
            return step()
        except SpotrunError as exc:  # spotrun's own translation of an AWS refusal, with a hint
            return Check(name, "fail", exc.message, exc.hint or f"see {README_POLICY}")
        except NoCredentialsError:
            return Check(
                name,
                "fail",
                "no AWS credentials found",
                "run `aws configure`, or set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY",
            )
        except ClientError as exc:
            return Check(name, "fail", f"AWS answered {error_code(exc)}: {exc}", _fix_for(exc))
        except BotoCoreError as exc:
            return Check(name, "fail", f"AWS could not be reached: {exc}", "check the network")

    # ------------------------------------------------------------------ checks
    def _client(self, service: str) -> Any:
        return self.provider.clients.client(service, self.region, attempts=2)

    def credentials(self) -> Check:
        identity = self._client("sts").get_caller_identity()
        return Check("credentials", "ok", f"acting as {identity['Arn']}")

    def region_enabled(self) -> Check:
        answer = self._client("ec2").describe_regions(RegionNames=[self.region], AllRegions=True)
        status = answer["Regions"][0].get("OptInStatus", "opt-in-not-required")
        if status == "not-opted-in":
            return Check(
                "region",
                "fail",
                f"{self.region} is not enabled for this account",
                "enable it in the AWS console (Account > AWS Regions), or set aws.region",
            )
        return Check("region", "ok", f"{self.region} ({status})")

    # image and network are asked of AWS here, never read from the launch's ten-minute cache:
    # that may hold what other credentials could see
    def image(self) -> Check:
        image = ec2i.resolve_image(self.provider.clients, self.region)
        return Check("image", "ok", f"{image.id} ({image.architecture}, from {image.source})")

    def network(self) -> Check:
        subnets = ec2_network.launch_subnets(self.provider.clients, self.region)
        zones = ", ".join(sorted(subnets))
        return Check("network", "ok", f"{len(subnets)} subnets, in {zones}")

    def offers(self) -> Check:
        found = self.provider.offers(self.resources)
        priced = [o for o in found if o.spot_usd_per_hour is not None]
        if not priced:
            return Check(
                "spot offers",
                "fail",
                f"no spot offer for {_wanted(self.resources)} in {self.region}'s subnets",
                "ask for other GPUs (--gpus, --instance-type), or another region",
            )
        self.found = priced
        self.offer = min(priced, key=lambda o: o.spot_usd_per_hour or 0.0)
        return Check(
            "spot offers",
            "ok",
            f"{len(priced)} for {_wanted(self.resources)}; cheapest {self.offer.instance_type} "
            f"{show_usd_per_hour(self.offer.spot_usd_per_hour)} in {self.offer.zone}; "
            "on-demand prices "
            f"from {self.provider.on_demand_source}",
        )

    def launch_permissions(self) -> Check:
        assert self.offer is not None
        allowed = self.provider.dry_run(self.offer) + self._reads_a_launch_needs()
        return Check("launch permissions", "ok", "DryRun allows " + ", ".join(allowed))

    def _reads_a_launch_needs(self) -> list[str]:
        """The describe calls a launch makes on what it creates (its instances, key pair and
        security group), asked with DryRun (moto answers some as if asked for real)."""
        ec2 = self._client("ec2")
        calls: dict[str, Callable[[], object]] = {
            "DescribeInstances": lambda: ec2.describe_instances(DryRun=True, MaxResults=5),
            "DescribeKeyPairs": lambda: ec2.describe_key_pairs(DryRun=True),
            "DescribeSecurityGroups": lambda: ec2.describe_security_groups(DryRun=True),
        }
        for operation, call in calls.items():
            with aws_call("ec2", operation, self.region):
                try:
                    call()
                except ClientError as exc:
                    if error_code(exc) != "DryRunOperation":
                        raise
        return list(calls)

    def quota(self) -> Check:
        """The spot and on-demand vCPU quotas of every family on offer, one row each; the
        verdict is the cheapest offer's spot quota (a launch can go on when it is not known)."""
        assert self.offer is not None
        readings: dict[str, QuotaReading] = {}

        def reading(quota: VcpuQuota) -> str:
            if quota.code is None:
                return f"{quota.label}: no code to ask Service Quotas for"
            if quota.code not in readings:
                readings[quota.code] = read_quota(self.provider.clients, self.region, quota.code)
            value = readings[quota.code].value
            said = f"{value:g} vCPUs" if value is not None else "not known"
            return f"{quota.label}: {said}"

        families: dict[str, set[str]] = {}
        for offer in self.found:
            group = family_group(offer.instance_type)
            if group is not None:
                families.setdefault(group, set()).add(offer.instance_type.split(".", 1)[0])
        rows = []
        for group, names in families.items():
            spot, on_demand = QUOTAS[group]
            quotas = [f"spot {reading(spot)}"] if spot is not None else []
            quotas.append(f"on-demand {reading(on_demand)}")
            rows.append(f"{self.region} {', '.join(sorted(names))}: {'; '.join(quotas)}")
        return self._quota_verdict(self.offer, readings, tuple(rows))

    def _quota_verdict(
        self, offer: Offer, readings: dict[str, QuotaReading], rows: tuple[str, ...]
    ) -> Check:
        spot, _ = QUOTAS.get(family_group(offer.instance_type) or "", (None, None))
        found = readings.get(spot.code) if spot is not None and spot.code else None
        if spot is None or found is None or found.value is None:
            why = found.why if found is not None else "no quota spotrun can ask for"
            return Check(
                "vCPU quota",
                "warn",
                f"not known for {offer.instance_type} ({why}); EC2 decides at launch",
                "grant servicequotas:GetServiceQuota to see it here",
                rows,
            )
        if found.value < offer.vcpus:
            return Check(
                "vCPU quota",
                "fail",
                f"{found.value:g} spot vCPUs ({spot.code}) < {offer.vcpus} that "
                f"{offer.instance_type} needs",
                increase_hint(spot, self.region, offer.vcpus),
                rows,
            )
        return Check(
            "vCPU quota",
            "ok",
            f"{found.value:g} spot vCPUs ({spot.code}) in {self.region}",
            "",
            rows,
        )

    def bucket(self) -> Check:
        bucket = self.aws.bucket
        if not bucket:
            return Check(
                "bucket",
                "warn",
                "no aws.bucket: checkpoints stay on the instance and die with it",
                "create a bucket and set aws.bucket in config.toml",
            )
        # the launch's own preflight check (a UsageError with what to do when it fails)
        s3 = self._client("s3")
        check_bucket(s3, bucket, self.region)
        # s3:GetObject on runs/* (resume, pull): a key that is not there answers 404 when it
        # may be read and 403 when not; nothing is written
        try:
            s3.head_object(Bucket=bucket, Key="runs/spotrun-doctor/none")
        except ClientError as exc:
            if error_code(exc) in ("403", "AccessDenied"):
                return Check(
                    "bucket",
                    "fail",
                    f"s3://{bucket}/runs/* cannot be read: AWS refused s3:GetObject",
                    f"grant s3:GetObject on arn:aws:s3:::{bucket}/runs/* ({README_POLICY})",
                )
            if error_code(exc) not in ("404", "NoSuchKey", "NotFound"):
                raise
        return Check("bucket", "ok", f"s3://{bucket} is usable (listed, runs/* readable)")

    def instance_profile(self) -> Check:
        profile = self.aws.instance_profile
        if not profile:
            needs = ", ".join(INSTANCE_ACTIONS)
            return Check(
                "instance profile",
                "warn",
                "no aws.instance_profile: instances get no AWS credentials, so they can neither "
                "upload checkpoints nor end themselves",
                f"make a role allowed {needs} (README's instance policy), and set "
                "aws.instance_profile to its instance profile",
            )
        return Check("instance profile", "ok", f"{profile} (RunInstances may pass it: DryRun)")


def _wanted(resources: Resources) -> str:
    if resources.instance_type:
        return resources.instance_type
    return f"{resources.gpus} GPU{'s' if resources.gpus != 1 else ''}"


def _fix_for(exc: ClientError) -> str:
    code = error_code(exc)
    if code in ("InvalidClientTokenId", "AuthFailure", "SignatureDoesNotMatch"):
        return "these credentials are not valid: check the keys, or run `aws configure` again"
    if code in ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "403"):
        return f"grant the permission named above; {README_POLICY} lists everything spotrun calls"
    if code in ("NoSuchBucket", "404"):
        return "create the bucket (aws s3 mb s3://NAME), or fix aws.bucket"
    return "see the AWS error above"
