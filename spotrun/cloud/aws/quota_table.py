"""EC2's vCPU quotas: which one holds an instance type, spot or on-demand, and how to ask for more.

Names and codes (Service Quotas, service code `ec2`) as AWS's "Amazon EC2 instance type quotas"
page lists them, with their defaults for a new account: every spot and on-demand quota of a GPU
or accelerator family starts at 0 vCPUs, the Standard ones at 5. EC2 answers a spot request over
its quota with MaxSpotInstanceCountExceeded ("Max spot instance count exceeded", the "Spot
Instance quotas" page) and an on-demand one with VcpuLimitExceeded. P6 instances appear on no
spot quota of that page: for them spotrun names no code and points at the console's list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class VcpuQuota:
    name: str
    code: str | None  # None: AWS's quotas page gives the family no spot quota of its own
    spot: bool

    @property
    def label(self) -> str:
        return f"'{self.name}' ({self.code})" if self.code else f"'{self.name}'"


def _spot(name: str, code: str | None) -> VcpuQuota:
    return VcpuQuota(name, code, spot=True)


def _on_demand(name: str, code: str) -> VcpuQuota:
    return VcpuQuota(name, code, spot=False)


# family group -> (spot quota, on-demand quota); a group without a spot market has None
QUOTAS: dict[str, tuple[VcpuQuota | None, VcpuQuota]] = {
    "standard": (
        _spot("All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests", "L-34B43A08"),
        _on_demand(
            "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "L-1216C47A"
        ),
    ),
    "g": (
        _spot("All G and VT Spot Instance Requests", "L-3819A6DF"),
        _on_demand("Running On-Demand G and VT instances", "L-DB2E81BA"),
    ),
    "p2-p4": (
        _spot("All P4, P3 and P2 Spot Instance Requests", "L-7212CCBC"),
        _on_demand("Running On-Demand P instances", "L-417A185B"),
    ),
    "p5": (
        _spot("All P5 Spot Instance Requests", "L-C4BD4855"),
        _on_demand("Running On-Demand P instances", "L-417A185B"),
    ),
    "p6": (
        _spot("the spot vCPU quota that holds P6 instances", None),
        _on_demand("Running On-Demand P instances", "L-417A185B"),
    ),
    "inf": (
        _spot("All Inf Spot Instance Requests", "L-B5D1601B"),
        _on_demand("Running On-Demand Inf instances", "L-1945791B"),
    ),
    "trn": (
        _spot("All Trn Spot Instance Requests", "L-6B0D517C"),
        _on_demand("Running On-Demand Trn instances", "L-2C3B7624"),
    ),
    "dl": (
        _spot("All DL Spot Instance Requests", "L-85EED4F7"),
        _on_demand("Running On-Demand DL instances", "L-6E869C2A"),
    ),
    "f": (
        _spot("All F Spot Instance Requests", "L-88CF9481"),
        _on_demand("Running On-Demand F instances", "L-74FC7D96"),
    ),
    "x": (
        _spot("All X Spot Instance Requests", "L-E3A00192"),
        _on_demand("Running On-Demand X instances", "L-7295265B"),
    ),
    "hpc": (None, _on_demand("Running On-Demand HPC instances", "L-F7808C92")),
    "high-memory": (None, _on_demand("Running On-Demand High Memory instances", "L-43DA4232")),
}
_OWN_LETTERS = {"inf": "inf", "trn": "trn", "dl": "dl", "vt": "g", "hpc": "hpc", "u": "high-memory"}


def family_group(instance_type: str) -> str | None:
    """The quota group of a type's family ("g5.xlarge" -> "g", "p5en.48xlarge" -> "p5")."""
    family = instance_type.split(".", 1)[0].lower()
    found = re.match(r"([a-z]+)(\d*)", family)
    if found is None:
        return None
    letters, generation = found.group(1), found.group(2)
    if letters in _OWN_LETTERS:
        return _OWN_LETTERS[letters]
    if letters == "p":
        return {"2": "p2-p4", "3": "p2-p4", "4": "p2-p4", "5": "p5"}.get(generation, "p6")
    if letters[0] in "gfx":
        return "g" if letters[0] == "g" else letters[0]
    if letters[0] in "acdhimrtz":
        return "standard"
    return None


def quota_of(instance_type: str, spot: bool) -> VcpuQuota | None:
    """The vCPU quota a launch of `instance_type` counts against (None: none spotrun knows)."""
    group = family_group(instance_type)
    if group is None:
        return None
    spot_quota, on_demand_quota = QUOTAS[group]
    return spot_quota if spot else on_demand_quota


def console_url(quota: VcpuQuota, region: str) -> str:
    """The Service Quotas console page of the quota (its EC2 list when it has no code)."""
    base = f"https://{region}.console.aws.amazon.com/servicequotas/home/services/ec2/quotas"
    return f"{base}/{quota.code}?region={region}" if quota.code else f"{base}?region={region}"


def increase_hint(quota: VcpuQuota, region: str, desired: int) -> str:
    """What to do: the exact request that raises the quota to `desired` vCPUs."""
    if quota.code is None:
        return (
            f"search the EC2 quotas for 'Spot Instance Requests' at {console_url(quota, region)} "
            f"and ask for {desired} vCPUs in {region}"
        )
    return (
        f"ask AWS for {desired} vCPUs: `aws service-quotas request-service-quota-increase "
        f"--service-code ec2 --quota-code {quota.code} --desired-value {desired} "
        f"--region {region}`, or at {console_url(quota, region)}"
    )
