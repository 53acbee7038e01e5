"""The account's EC2 vCPU quota, asked of Service Quotas before a multi-node launch.

A cluster of N nodes needs N x the type's vCPUs at once (RunInstances asks for all of them, so
EC2 refuses the whole request when the quota is short). The quota holds every running or
pending instance of its families in the region (spot instances for a spot quota, the others
for an on-demand one), so those already in use count too. Asking first turns that into a clear
refusal at launch, with nothing made. When Service Quotas cannot answer (no permission, no
such quota here) the check is skipped and EC2 decides at the request, as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from spotrun.cloud.aws.errors import vcpu_quota_name
from spotrun.cloud.aws.offers import describe_types
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.base import Offer
from spotrun.core.errors import SpotrunError, UsageError

log = logging.getLogger(__name__)

# Service Quotas codes of the EC2 vCPU quotas, by instance family prefix (first match wins).
SPOT_CODES = (
    (("p4", "p3", "p2"), "L-7212CCBC"),
    (("g", "vt"), "L-3819A6DF"),
    (("a", "c", "d", "h", "i", "m", "r", "t", "z"), "L-34B43A08"),
)
ON_DEMAND_CODES = (
    (("p4", "p3", "p2"), "L-417A185B"),
    (("g", "vt"), "L-DB2E81BA"),
    (("a", "c", "d", "h", "i", "m", "r", "t", "z"), "L-1216C47A"),
)


def quota_code(instance_type: str, spot: bool) -> str | None:
    family = instance_type.split(".", 1)[0].lower()
    for prefixes, code in SPOT_CODES if spot else ON_DEMAND_CODES:
        if family.startswith(prefixes):
            return code
    return None  # a family whose quota code spotrun does not know: EC2 decides


def vcpu_quota(clients: AwsClients, region: str, code: str) -> float | None:
    """The quota's value in vCPUs, or None when Service Quotas does not say."""
    try:
        answer = clients.client("service-quotas", region, attempts=2).get_service_quota(
            ServiceCode="ec2", QuotaCode=code
        )
        return float(answer["Quota"]["Value"])
    except (ClientError, BotoCoreError, KeyError, ValueError) as exc:
        log.info("vCPU quota %s not known (%s); EC2 decides at launch", code, exc)
        return None


@dataclass(frozen=True)
class InUse:
    vcpus: int
    instances: int


def vcpus_in_use(clients: AwsClients, region: str, code: str, spot: bool) -> InUse | None:
    """The vCPUs of the region's running and pending instances that the quota `code` holds,
    or None when EC2 will not say (they are then left to EC2's own check)."""
    ec2 = clients.client("ec2", region)
    counted: dict[str, int] = {}  # instance type -> instances
    try:
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
        )
        for page in pages:
            for reservation in page.get("Reservations", []):
                for item in reservation.get("Instances", []):
                    if _held_by(item, code, spot):
                        counted[item["InstanceType"]] = counted.get(item["InstanceType"], 0) + 1
        if not counted:
            return InUse(0, 0)
        sizes = {t.name: t.vcpus for t in describe_types(clients, region, sorted(counted))}
    except (ClientError, BotoCoreError, SpotrunError) as exc:
        log.info("instances in use not known (%s); EC2 decides at launch", exc)
        return None
    return InUse(sum(sizes.get(kind, 0) * n for kind, n in counted.items()), sum(counted.values()))


def _held_by(item: dict[str, Any], code: str, spot: bool) -> bool:
    # EC2 marks spot instances InstanceLifecycle "spot"; on-demand ones carry none.
    if (item.get("InstanceLifecycle") == "spot") != spot:
        return False
    return quota_code(str(item.get("InstanceType", "")), spot) == code


def check_cluster_quota(clients: AwsClients, offer: Offer, nodes: int) -> None:
    """UsageError when N nodes of the offer, with the vCPUs already in use under the same
    quota, need more vCPUs than the account's quota."""
    spot = offer.market == "spot"
    code = quota_code(offer.instance_type, spot)
    if code is None:
        return
    quota = vcpu_quota(clients, offer.region, code)
    if quota is None:
        return
    needed = offer.vcpus * nodes
    if needed > quota:
        in_use = None  # N nodes alone are too many
    else:
        in_use = vcpus_in_use(clients, offer.region, code, spot)
        if in_use is None or in_use.vcpus + needed <= quota:
            return
    busy = ""
    if in_use is not None and in_use.vcpus:
        kind = "spot" if spot else "on-demand"
        busy = (
            f" and {in_use.vcpus} are in use ({in_use.instances} running or pending {kind} "
            f"instance(s) under the same quota)"
        )
    raise UsageError(
        f"{nodes} x {offer.instance_type} need {needed} vCPUs{busy}, more than the account's "
        f"quota '{vcpu_quota_name(offer.instance_type, spot)}' of {quota:g} vCPUs in "
        f"{offer.region}",
        hint="raise it in Service Quotas, wait for instances in use to end, or ask for fewer "
        "nodes or a smaller type",
    )
