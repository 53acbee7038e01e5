"""The IAM permissions spotrun needs: the one source the README's policies are checked against.

Two identities act: the user running spotrun (launch, watch, clean up) and the instance's role
(store checkpoints, read data sets, end its own instance). The role of `controller up --on
aws`'s instance holds the user policy and `controller_stop_policy` (stop itself when idle).
tests/unit/cloud/test_aws_policy.py checks that every AWS operation in spotrun's code is
allowed to one of them and that the README's JSON says exactly this.
"""

from __future__ import annotations

from typing import Any

# Read-only and creating calls of the user, on any resource.
USER_ACTIONS = (
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeImages",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeKeyPairs",
    "ec2:DescribeVolumes",
    "ec2:DescribeSpotInstanceRequests",
    "ec2:DescribeRegions",
    "ec2:RunInstances",
    "ec2:CreateTags",
    "ec2:ImportKeyPair",
    "ec2:CreateSecurityGroup",
    "ec2:AuthorizeSecurityGroupIngress",
    "ssm:GetParameter",
    "pricing:GetProducts",
    "ec2:DescribeSnapshots",
    "ec2:CreateVolume",
    "ec2:AttachVolume",
    "ec2:DetachVolume",
    "ec2:CreatePlacementGroup",
    "ec2:DescribePlacementGroups",
    "servicequotas:GetServiceQuota",
    "ec2:GetSpotPlacementScores",  # ranking offers (optional: without it, none are scored)
    "ec2:DescribeAvailabilityZones",  # the zone names of the scores' zone IDs
)
# Ending calls of the user, allowed only on what spotrun tagged as a run's.
USER_TAGGED_ACTIONS = (
    "ec2:TerminateInstances",
    "ec2:DeleteKeyPair",
    "ec2:DeleteSecurityGroup",
    "ec2:RevokeSecurityGroupIngress",  # a reused run's group: the caller's old address
    "ec2:DeleteVolume",
    "ec2:CancelSpotInstanceRequests",
    "ec2:DeletePlacementGroup",
)
USER_S3_ACTIONS = ("s3:ListBucket", "s3:GetObject", "s3:PutObject", "s3:DeleteObject")
INSTANCE_ACTIONS = ("s3:ListBucket", "s3:PutObject", "s3:GetObject", "ec2:TerminateInstances")
# The controller instance (tag spotrun:role=controller): the user starts it again, its own role
# stops it when idle. Allowed on no other instance.
CONTROLLER_TAG = {"StringEquals": {"aws:ResourceTag/spotrun:role": "controller"}}
USER_CONTROLLER_ACTIONS = ("ec2:StartInstances",)
CONTROLLER_ACTIONS = ("ec2:StopInstances",)


def user_policy(
    bucket: str = "BUCKET",
    data_bucket: str = "DATA-BUCKET",
    role: str = "ROLE",
    controller_role: str = "CONTROLLER-ROLE",
) -> dict[str, Any]:
    """The identity policy of the user running spotrun. The role of `controller up --on aws`'s
    instance holds it too (it launches the runs); the user passes that role to it."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Resource": "*", "Action": list(USER_ACTIONS)},
            {
                "Effect": "Allow",
                "Resource": "*",
                "Action": list(USER_TAGGED_ACTIONS),
                "Condition": {"StringLike": {"aws:ResourceTag/spotrun:run-id": "*"}},
            },
            {  # the next command starts the controller instance that stopped itself (idle)
                "Effect": "Allow",
                "Resource": "*",
                "Action": list(USER_CONTROLLER_ACTIONS),
                "Condition": CONTROLLER_TAG,
            },
            {  # HeadBucket on a data set's bucket: it exists, and its region for the plan
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{data_bucket}"],
            },
            {
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject"],
                "Resource": [f"arn:aws:s3:::{bucket}/runs/*", f"arn:aws:s3:::{data_bucket}/*"],
            },
            {  # `spotrun rm`: a forgotten run's stored files, never a data set's
                "Effect": "Allow",
                "Action": ["s3:DeleteObject"],
                "Resource": f"arn:aws:s3:::{bucket}/runs/*",
            },
            {
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": [
                    f"arn:aws:iam::*:role/{role}",
                    f"arn:aws:iam::*:role/{controller_role}",
                ],
            },
        ],
    }


def instance_policy(bucket: str = "BUCKET", data_bucket: str = "DATA-BUCKET") -> dict[str, Any]:
    """The policy of the instance profile's role: its run's checkpoints, the data sets, and
    terminating itself (`${ec2:InstanceID}` is the instance whose credentials ask)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": f"arn:aws:s3:::{bucket}"},
            {
                "Effect": "Allow",
                "Action": ["s3:PutObject", "s3:GetObject"],
                "Resource": f"arn:aws:s3:::{bucket}/runs/*",
            },
            {
                "Effect": "Allow",
                "Action": ["s3:GetObject"],
                "Resource": f"arn:aws:s3:::{data_bucket}/*",
            },
            {
                "Effect": "Allow",
                "Action": "ec2:TerminateInstances",
                "Resource": "arn:aws:ec2:*:*:instance/${ec2:InstanceID}",
                "Condition": {"StringLike": {"aws:ResourceTag/spotrun:run-id": "*"}},
            },
        ],
    }


def controller_stop_policy() -> dict[str, Any]:
    """The controller instance's role holds the user policy and this: it may stop itself
    (idle), and only itself, and only as long as it is tagged spotrun:role=controller."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": list(CONTROLLER_ACTIONS),
                "Resource": "arn:aws:ec2:*:*:instance/${ec2:InstanceID}",
                "Condition": CONTROLLER_TAG,
            }
        ],
    }


def allowed_actions() -> frozenset[str]:
    """Every action either identity may take (for checking code against the policies)."""
    return frozenset(
        USER_ACTIONS
        + USER_TAGGED_ACTIONS
        + USER_S3_ACTIONS
        + INSTANCE_ACTIONS
        + USER_CONTROLLER_ACTIONS
        + CONTROLLER_ACTIONS
    )
