"""AWS error codes, mapped to spotrun errors here and nowhere else.

Every boto3 call of the provider runs inside `aws_call(...)`, which turns botocore's exceptions
into the SpotrunError a user can act on: capacity errors (the controller moves on to the next
offer), quota and permission errors (naming what to raise), bad input (exit 2), and the rest.
Throttling (RequestLimitExceeded) never reaches this: botocore's standard retry mode absorbs it.
"""

from __future__ import annotations

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

from spotrun.core.errors import (
    CapacityError,
    CloudError,
    CredentialsError,
    QuotaError,
    SpotrunError,
    UsageError,
)

# The request could be filled elsewhere: another zone, another type, later.
CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "UnfulfillableCapacity",
        "SpotMaxPriceTooLow",
        "MaxSpotInstanceCountExceeded",
        "InsufficientFreeAddressesInSubnet",
        "Unsupported",  # the type is not offered in this zone
    }
)
QUOTA_CODES = frozenset({"VcpuLimitExceeded", "InstanceLimitExceeded"})
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


# The Service Quotas names (and codes) of the spot vCPU quotas, by instance family letter(s).
_SPOT_QUOTAS = (
    (("p5", "p6"), "All P5 Spot Instance Requests"),
    (("p4", "p3", "p2"), "All P4, P3 and P2 Spot Instance Requests (L-7212CCBC)"),
    (("g", "vt"), "All G and VT Spot Instance Requests (L-3819A6DF)"),
    (("inf",), "All Inf Spot Instance Requests"),
    (("trn",), "All Trn Spot Instance Requests"),
    (("dl",), "All DL Spot Instance Requests"),
    (("f",), "All F Spot Instance Requests"),
    (("x",), "All X Spot Instance Requests"),
)
_STANDARD_SPOT_QUOTA = (
    "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests (L-34B43A08)"
)
_ON_DEMAND_QUOTAS = (
    (("p",), "Running On-Demand P instances (L-417A185B)"),
    (("g", "vt"), "Running On-Demand G and VT instances (L-DB2E81BA)"),
)
_STANDARD_ON_DEMAND_QUOTA = "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"


def vcpu_quota_name(instance_type: str, spot: bool) -> str:
    """The EC2 vCPU quota that a launch of `instance_type` counts against."""
    family = instance_type.split(".", 1)[0].lower()
    table = _SPOT_QUOTAS if spot else _ON_DEMAND_QUOTAS
    for prefixes, name in table:
        if family.startswith(prefixes):
            return name
    return _STANDARD_SPOT_QUOTA if spot else _STANDARD_ON_DEMAND_QUOTA


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
    where = f"{instance_type} in {region}" if instance_type else region
    if code in CAPACITY_CODES:
        return CapacityError(f"{code}: {message}" if message else code)
    if code in QUOTA_CODES:
        quota = vcpu_quota_name(instance_type or "", spot)
        return QuotaError(
            f"{code}: the account's vCPU quota does not allow {where}",
            hint=f"raise the EC2 quota '{quota}' in Service Quotas ({region}), or ask for "
            "fewer GPUs",
        )
    if code in PERMISSION_CODES:
        action = f"{_iam_prefix(service)}:{operation}"
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
