"""AWS error codes, mapped to spotrun errors here and nowhere else.

Every boto3 call of the provider runs inside `aws_call(...)`, which turns botocore's exceptions
into the SpotrunError a user can act on: capacity errors (the controller moves on to the next
offer), quota and permission errors (naming what to raise), bad input (exit 2), and the rest.
Throttling (RequestLimitExceeded) never reaches this: botocore's standard retry mode absorbs it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    WaiterError,
)

from spotrun.cloud.aws.quota_table import console_url, increase_hint, quota_of
from spotrun.core.errors import (
    CapacityError,
    CloudError,
    CredentialsError,
    QuotaError,
    SpotrunError,
    UsageError,
    VcpuQuotaError,
)

# The request could be filled elsewhere: another zone, another type, later.
CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "UnfulfillableCapacity",
        "SpotMaxPriceTooLow",
        "InsufficientFreeAddressesInSubnet",
        "Unsupported",  # the type is not offered in this zone
    }
)
# The account's vCPU quota is full: EC2 says MaxSpotInstanceCountExceeded for a spot request,
# VcpuLimitExceeded for an on-demand one (InstanceLimitExceeded: the older instance count limits)
QUOTA_CODES = frozenset(
    {"MaxSpotInstanceCountExceeded", "VcpuLimitExceeded", "InstanceLimitExceeded"}
)
PERMISSION_CODES = frozenset(
    {"UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "Forbidden"}
)
CREDENTIAL_CODES = frozenset(
    {
        "AuthFailure",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "UnrecognizedClientException",
        "ExpiredToken",
        "RequestExpired",
    }
)
# Never worth a second call: retrying them only delays the move to the next offer.
FAIL_FAST_CODES = CAPACITY_CODES | QUOTA_CODES | PERMISSION_CODES

CREDENTIALS_HINT = (
    "set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run `aws configure`"
)
# botocore's errors for credentials that are missing, half set or name an unknown profile
CREDENTIAL_ERRORS = (NoCredentialsError, PartialCredentialsError, ProfileNotFound)


def credentials_error(exc: BaseException) -> CredentialsError:
    """The one message for unusable credentials, wherever boto3 finds out (making a session,
    a client, or sending a request): every command words it the same."""
    if isinstance(exc, PartialCredentialsError):
        missing = exc.kwargs.get("cred_var", "a key")
        what = f"incomplete AWS credentials ({missing} is missing)"
    elif isinstance(exc, ProfileNotFound):
        what = f"AWS profile '{exc.kwargs.get('profile')}' is not in the AWS config files"
    else:
        what = "no AWS credentials found"
    return CredentialsError(what, hint=CREDENTIALS_HINT)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def error_message(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message", "")).strip()


def vcpu_quota_name(instance_type: str, spot: bool) -> str:
    """The EC2 vCPU quota that a launch of `instance_type` counts against, with its code."""
    quota = quota_of(instance_type, spot)
    if quota is None:
        return f"the {'spot' if spot else 'on-demand'} vCPU quota of {instance_type}"
    return quota.name if quota.code is None else f"{quota.name} ({quota.code})"


def vcpu_refusal(
    code: str,
    *,
    region: str,
    instance_type: str,
    spot: bool,
    needed: int | None = None,
    desired: int | None = None,
) -> QuotaError:
    """EC2's refusal of a request over the account's vCPU quota, naming the quota and giving
    the exact request that raises it to `desired` vCPUs (what the launch needs, with what is
    in use under the same quota)."""
    quota = quota_of(instance_type, spot)
    if quota is None:
        return QuotaError(
            f"{code}: the account's vCPU quota does not allow {instance_type} in {region}",
            hint="raise the quota of its family in Service Quotas, or ask for another type",
        )
    what = f"{needed} vCPUs of {instance_type}" if needed else instance_type
    value = desired or needed
    hint = (
        increase_hint(quota, region, value)
        if value
        else f"raise it at {console_url(quota, region)}"
    )
    return VcpuQuotaError(
        f"{code}: the account's vCPU quota {quota.label} in {region} cannot hold {what}",
        quota=quota.name,
        hint=hint,
    )


def translate(
    exc: BaseException,
    *,
    service: str,
    operation: str,
    region: str,
    instance_type: str | None = None,
    spot: bool = True,
) -> SpotrunError:
    """The spotrun error for a botocore failure of `service`:`operation` in `region`."""
    if isinstance(exc, CREDENTIAL_ERRORS):
        return credentials_error(exc)
    if isinstance(exc, NoRegionError):
        return UsageError("no AWS region set", hint="set aws.region in config.toml")
    if isinstance(exc, EndpointConnectionError):
        return CloudError(
            f"cannot reach the AWS {service} endpoint for {region}: {exc}",
            hint="check the network, or AWS_ENDPOINT_URL if you set one",
        )
    if isinstance(exc, WaiterError):
        return CloudError(f"gave up waiting on AWS {operation} in {region}: {exc}")
    if not isinstance(exc, ClientError):
        if isinstance(exc, BotoCoreError):
            return CloudError(f"AWS {service} {operation} failed in {region}: {exc}")
        raise exc
    code = error_code(exc)
    message = error_message(exc)
    if code in CAPACITY_CODES:
        return CapacityError(f"{code}: {message}" if message else code)
    if code in QUOTA_CODES:
        if instance_type is None:
            return QuotaError(
                f"{code}: the account's vCPU quota does not allow this request in {region}",
                hint="raise the instance family's vCPU quota in Service Quotas",
            )
        return vcpu_refusal(code, region=region, instance_type=instance_type, spot=spot)
    if code in PERMISSION_CODES:
        action = f"{_iam_prefix(service)}:{operation}"
        # AWS names the action it refused, which is not always the call's own (RunInstances
        # with an instance profile also needs iam:PassRole on the profile's role)
        named = re.search(r"not authorized to perform: ([\w-]+:[\w*]+)", message)
        if named and named.group(1).lower() != action.lower():
            action = named.group(1)
            return QuotaError(
                f"{code}: these AWS credentials may not call {action} (which {operation} "
                f"needs) in {region}",
                hint=f"grant {action} to the IAM user or role that spotrun runs as",
            )
        return QuotaError(
            f"{code}: these AWS credentials may not call {action} in {region}",
            hint=f"grant {action} to the IAM user or role that spotrun runs as",
        )
    if code in CREDENTIAL_CODES:
        return UsageError(
            f"AWS rejected the credentials ({code}: {message})", hint=CREDENTIALS_HINT
        )
    if code in ("RequestLimitExceeded", "Throttling", "ThrottlingException"):
        return CloudError(
            f"AWS kept throttling {operation} in {region} after retries ({code})",
            hint="try again in a minute, or raise aws.max_attempts",
        )
    if code.startswith("InvalidAMIID"):
        return UsageError(f"the image is not usable in {region}: {message or code}")
    return CloudError(f"AWS {service} {operation} failed in {region}: {code}: {message}")


def _iam_prefix(service: str) -> str:
    return {"ec2": "ec2", "s3": "s3", "ssm": "ssm", "sts": "sts", "pricing": "pricing"}.get(
        service, service
    )


@contextmanager
def aws_call(
    service: str,
    operation: str,
    region: str,
    *,
    instance_type: str | None = None,
    spot: bool = True,
) -> Iterator[None]:
    """Run boto3 calls; raise what `translate` makes of any botocore failure."""
    try:
        yield
    except (BotoCoreError, ClientError) as exc:
        raise translate(
            exc,
            service=service,
            operation=operation,
            region=region,
            instance_type=instance_type,
            spot=spot,
        ) from exc


def fail_fast(response: Any = None, **_: Any) -> bool | None:
    """botocore needs-retry hook: False (do not retry) for capacity, quota, permission codes.

    EC2 sends capacity errors as server errors (HTTP 500), which botocore would otherwise retry
    with backoff, delaying the move to the next zone or type by many seconds.
    """
    if not response:
        return None
    parsed = response[1] if isinstance(response, tuple) and len(response) > 1 else None
    if not isinstance(parsed, dict):
        return None
    code = parsed.get("Error", {}).get("Code")
    return False if code in FAIL_FAST_CODES else None
