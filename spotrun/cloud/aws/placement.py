"""Cluster placement groups: a multi-node run's instances close together in one zone.

A cluster placement group packs instances onto nearby hardware (low latency, full bisection
bandwidth between them), which NCCL's all-reduce every step needs. Each multi-node run has one,
named and tagged after the run, made before the first RunInstances and deleted with the run.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from spotrun.cloud.aws.errors import aws_call, error_code
from spotrun.cloud.aws.network import TAG_RUN, resource_name, tag_specs
from spotrun.cloud.aws.session import AwsClients


def group_name(run_id: str, zone: str) -> str:
    # One per zone: a cluster group lives in one zone, and a cluster that moves gets another.
    return f"{resource_name(run_id)}-{zone}"


def ensure_cluster_group(
    clients: AwsClients, region: str, zone: str, run_id: str, tags: list[dict[str, str]]
) -> str:
    """The run's cluster placement group in `zone`, made unless it exists (safe to repeat)."""
    ec2 = clients.client("ec2", region)
    name = group_name(run_id, zone)
    with aws_call("ec2", "CreatePlacementGroup", region):
        try:
            ec2.create_placement_group(
                GroupName=name,
                Strategy="cluster",
                TagSpecifications=tag_specs(["placement-group"], tags),
            )
        except ClientError as exc:
            if error_code(exc) != "InvalidPlacementGroup.Duplicate":
                raise
    return name


def delete_cluster_group(clients: AwsClients, region: str, run_id: str) -> bool:
    """Delete the run's placement groups; True if any was deleted."""
    ec2 = clients.client("ec2", region)
    with aws_call("ec2", "DescribePlacementGroups", region):
        groups = ec2.describe_placement_groups(
            Filters=[{"Name": f"tag:{TAG_RUN}", "Values": [run_id]}]
        ).get("PlacementGroups", [])
    deleted = False
    for group in groups:
        with aws_call("ec2", "DeletePlacementGroup", region):
            try:
                ec2.delete_placement_group(GroupName=group["GroupName"])
                deleted = True
            except ClientError as exc:
                if error_code(exc) != "InvalidPlacementGroup.Unknown":
                    raise
    return deleted
