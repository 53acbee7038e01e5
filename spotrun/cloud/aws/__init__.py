"""The AWS provider: boto3 is imported in this package and nowhere else in spotrun."""

from spotrun.cloud.aws.provider import AwsProvider

__all__ = ["AwsProvider"]
