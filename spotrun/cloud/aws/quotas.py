"""The account's EC2 vCPU quotas, asked of Service Quotas before a launch.

Every launch counts against one vCPU quota of its family (spotrun.cloud.aws.quota_table), and
a new account's GPU quotas are 0: EC2 would refuse each such offer at the request. Asking
first leaves out of the plan the offers their quota cannot hold (N nodes need N x the type's
vCPUs at once; the instances already running or pending under the same quota count too), with
a line saying so, and refuses the launch with the exact request to raise the quota when none
is left. When Service Quotas cannot answer (no permission, no such quota here) the quota is
"not known", said in one line, and EC2 decides at the request, as before: never a block.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from spotrun.cloud.aws.errors import error_code, vcpu_quota_name, vcpu_refusal
from spotrun.cloud.aws.offers import describe_types
from spotrun.cloud.aws.quota_table import VcpuQuota, increase_hint, quota_of
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.base import Offer
from spotrun.cloud.quota_screen import QuotaScreen
from spotrun.core.errors import QuotaError, SpotrunError, UsageError, VcpuQuotaError

log = logging.getLogger(__name__)


def quota_code(instance_type: str, spot: bool) -> str | None:
    quota = quota_of(instance_type, spot)
    return quota.code if quota is not None else None  # None: EC2 decides


@dataclass(frozen=True)
class QuotaReading:
    value: float | None  # vCPUs; None when Service Quotas did not say
    why: str = ""  # why not, in words


def read_quota(clients: AwsClients, region: str, code: str) -> QuotaReading:
    """The quota's value in vCPUs as Service Quotas says, or why it did not."""
    try:
        answer = clients.client("service-quotas", region, attempts=2).get_service_quota(
            ServiceCode="ec2", QuotaCode=code
        )
        return QuotaReading(float(answer["Quota"]["Value"]))
    except ClientError as exc:
        why = f"Service Quotas answered {error_code(exc) or exc}"
    except (BotoCoreError, KeyError, ValueError, TypeError) as exc:
        why = f"Service Quotas did not answer ({exc})"
    log.info("vCPU quota %s not known (%s); EC2 decides at launch", code, why)
    return QuotaReading(None, why)


def vcpu_quota(clients: AwsClients, region: str, code: str) -> float | None:
    """The quota's value in vCPUs, or None when Service Quotas does not say."""
    return read_quota(clients, region, code).value


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


def _spot(offer: Offer) -> bool:
    return offer.market == "spot"


def screen_offers(clients: AwsClients, offers: list[Offer], nodes: int) -> QuotaScreen:
    """The offers whose vCPU quota holds `nodes` of them beside what is in use; one line per
    quota that left offers out or could not be read (asked once per quota and region)."""
    readings: dict[tuple[str, str], QuotaReading] = {}
    in_use: dict[tuple[str, str, bool], InUse | None] = {}
    kept: list[Offer] = []
    left_out: dict[tuple[str, VcpuQuota], list[Offer]] = {}
    unknown: dict[tuple[str, VcpuQuota], str] = {}
    for offer in offers:
        quota = quota_of(offer.instance_type, _spot(offer))
        if quota is None or quota.code is None:
            kept.append(offer)  # a quota spotrun cannot ask for: EC2 decides
            continue
        key = (offer.region, quota.code)
        if key not in readings:
            readings[key] = read_quota(clients, offer.region, quota.code)
        reading = readings[key]
        if reading.value is None:
            unknown[(offer.region, quota)] = reading.why
            kept.append(offer)
            continue
        needed = offer.vcpus * nodes
        used = 0
        if needed <= reading.value:
            use_key = (offer.region, quota.code, _spot(offer))
            if use_key not in in_use:
                in_use[use_key] = vcpus_in_use(clients, offer.region, quota.code, _spot(offer))
            known = in_use[use_key]
            used = known.vcpus if known is not None else 0
            if used + needed <= reading.value:
                kept.append(offer)
                continue
        left_out.setdefault((offer.region, quota), []).append(offer)
    lines = [
        _left_out_line(region, quota, group, readings[(region, str(quota.code))].value, nodes)
        for (region, quota), group in left_out.items()
    ]
    lines += [
        f"vCPU quota {quota.label} in {region} not known ({why}): EC2 decides at the request"
        for (region, quota), why in unknown.items()
    ]
    refusal = None
    if not kept and left_out:
        (region, quota), group = next(iter(left_out.items()))
        refusal = _refusal(clients, region, quota, group[0], nodes, readings)
    return QuotaScreen(kept, lines, refusal)


def _left_out_line(
    region: str, quota: VcpuQuota, group: list[Offer], value: float | None, nodes: int
) -> str:
    types = sorted({o.instance_type for o in group})
    count = f"{nodes} x " if nodes > 1 else ""
    return (
        f"left out {len(group)} offer(s) of {', '.join(count + t for t in types)}: the vCPU "
        f"quota {quota.label} in {region} is {value or 0:g} vCPUs: it cannot hold them beside "
        "what is in use"
    )


def _refusal(
    clients: AwsClients,
    region: str,
    quota: VcpuQuota,
    offer: Offer,
    nodes: int,
    readings: dict[tuple[str, str], QuotaReading],
) -> VcpuQuotaError:
    value = readings[(region, str(quota.code))].value or 0.0
    needed = offer.vcpus * nodes
    known = vcpus_in_use(clients, region, str(quota.code), _spot(offer)) if value else None
    used = known.vcpus if known is not None else 0
    busy = f" and {used} are in use" if used else ""
    what = f"{nodes} x {offer.instance_type} need" if nodes > 1 else f"{offer.instance_type} needs"
    return VcpuQuotaError(
        f"no offer fits the account's vCPU quotas: {what} {needed} vCPUs{busy}, more than the "
        f"account's quota {quota.label} of {value:g} vCPUs in {region}",
        quota=quota.name,
        hint=increase_hint(quota, region, used + needed),
    )


def launch_refusal(
    clients: AwsClients, refused: QuotaError, offer: Offer, count: int
) -> QuotaError:
    """EC2's quota refusal of a launch of `count` x `offer`, with the value to ask for: the
    vCPUs the launch needs, with those in use under the same quota."""
    cause = refused.__cause__
    if not isinstance(refused, VcpuQuotaError) or not isinstance(cause, ClientError):
        return refused
    spot = _spot(offer)
    needed = offer.vcpus * count
    code = quota_code(offer.instance_type, spot)
    known = vcpus_in_use(clients, offer.region, code, spot) if code else None
    return vcpu_refusal(
        error_code(cause),
        region=offer.region,
        instance_type=offer.instance_type,
        spot=spot,
        needed=needed,
        desired=needed + (known.vcpus if known is not None else 0),
    )
