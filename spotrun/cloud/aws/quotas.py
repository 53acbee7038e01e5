"""The account's EC2 vCPU quota, asked of Service Quotas before a multi-node launch.

A cluster of N nodes needs N x the type's vCPUs at once (RunInstances asks for all of them, so
EC2 refuses the whole request when the quota is short). Asking first turns that into a clear
refusal at launch, with nothing made. When Service Quotas cannot answer (no permission, no
such quota here) the check is skipped and EC2 decides at the request, as before.
"""

from __future__ import annotations

import logging

from botocore.exceptions import BotoCoreError, ClientError

from spotrun.cloud.aws.errors import vcpu_quota_name
from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.base import Offer
from spotrun.errors import UsageError

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


def check_cluster_quota(clients: AwsClients, offer: Offer, nodes: int) -> None:
    """UsageError when N nodes of the offer need more vCPUs than the account's quota."""
    spot = offer.market == "spot"
    code = quota_code(offer.instance_type, spot)
    if code is None:
        return
    quota = vcpu_quota(clients, offer.region, code)
    needed = offer.vcpus * nodes
    if quota is None or needed <= quota:
        return
    raise UsageError(
        f"{nodes} x {offer.instance_type} need {needed} vCPUs, more than the account's quota "
        f"'{vcpu_quota_name(offer.instance_type, spot)}' of {quota:g} vCPUs in {offer.region}",
        hint="raise it in Service Quotas, or ask for fewer nodes or a smaller type",
    )
