"""The AWS provider's pure parts: error mapping, quota names, idempotency tokens, times, the
code bundle, the shipped price table."""

from __future__ import annotations

import tarfile
from datetime import datetime, timezone

import pytest
from botocore.exceptions import ClientError, NoCredentialsError

from spotrun.cloud.aws.errors import fail_fast, translate, vcpu_quota_name
from spotrun.cloud.aws.instances import client_token, ended_at
from spotrun.cloud.base import Offer
from spotrun.cloud.pricing_table import shipped_table
from spotrun.core.errors import CapacityError, CloudError, QuotaError, UsageError
from spotrun.remote.provision import code_bundle


def _client_error(code: str, message: str = "m") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "RunInstances")


def _translate(exc: BaseException, **kw: object) -> Exception:
    return translate(exc, service="ec2", operation="RunInstances", region="us-east-1", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "code", ["InsufficientInstanceCapacity", "SpotMaxPriceTooLow", "MaxSpotInstanceCountExceeded"]
)
def test_capacity_codes_become_capacity_errors(code: str) -> None:
    err = _translate(_client_error(code, "no room"))
    assert isinstance(err, CapacityError) and err.message == f"{code}: no room"


def test_quota_and_permission_errors_name_what_to_raise() -> None:
    quota = _translate(_client_error("VcpuLimitExceeded"), instance_type="g5.xlarge")
    assert isinstance(quota, QuotaError)
    assert "All G and VT Spot Instance Requests (L-3819A6DF)" in quota.user_message()
    denied = _translate(_client_error("UnauthorizedOperation"))
    assert isinstance(denied, QuotaError) and "ec2:RunInstances" in denied.user_message()
    assert isinstance(_translate(NoCredentialsError()), UsageError)
    assert isinstance(_translate(_client_error("AuthFailure")), UsageError)
    other = _translate(_client_error("InvalidParameterValue", "bad"))
    assert type(other) is CloudError and "InvalidParameterValue: bad" in other.message


def test_quota_names_by_family() -> None:
    assert vcpu_quota_name("p4d.24xlarge", spot=True).startswith("All P4, P3 and P2 Spot")
    assert vcpu_quota_name("c6i.large", spot=True).startswith("All Standard")
    assert vcpu_quota_name("g6.xlarge", spot=False).startswith("Running On-Demand G and VT")


def test_fail_fast_stops_retries_of_capacity_errors_only() -> None:
    def response(code: str) -> tuple[object, dict[str, object]]:
        return (object(), {"Error": {"Code": code}})

    assert fail_fast(response=response("InsufficientInstanceCapacity")) is False
    assert fail_fast(response=response("RequestLimitExceeded")) is None  # botocore retries it
    assert fail_fast(response=None) is None


def _offer(zone: str = "us-east-1a") -> Offer:
    return Offer("aws", "g5.xlarge", "us-east-1", zone, 1, "A10G", 24.0, 4, 16.0, 0.4, 1.0)


def test_client_token_is_stable_per_request_and_fits_ec2() -> None:
    token = client_token("abc123def456", _offer(), 0)
    assert token == client_token("abc123def456", _offer(), 0) and len(token) <= 64
    assert token != client_token("abc123def456", _offer("us-east-1b"), 0)  # another zone
    assert token != client_token("abc123def456", _offer(), 1)  # a replacement


def test_ended_at_reads_the_state_transition_reason() -> None:
    moment = datetime(2026, 5, 4, 3, 2, 1, tzinfo=timezone.utc).timestamp()
    assert ended_at({"StateTransitionReason": "User initiated (2026-05-04 03:02:01 GMT)"}) == moment
    assert (
        ended_at({"StateTransitionReason": "Service initiated (2026-05-04 03:02:01 UTC)"}) == moment
    )
    assert ended_at({"StateTransitionReason": ""}) is None


def test_code_bundle_is_the_package_and_deterministic() -> None:
    bundle = code_bundle()
    with tarfile.open(bundle.path) as tar:
        names = tar.getnames()
        assert {m.mtime for m in tar.getmembers()} == {0}
    assert "spotrun/provision/provision.sh" in names and "spotrun/cli/main.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    code_bundle.cache_clear()
    assert code_bundle().digest == bundle.digest


def test_shipped_table_states_its_date() -> None:
    table = shipped_table()
    assert table.as_of == "2024-06-01" and "2024-06-01" in table.label
    assert table.price("us-east-1", "g5.xlarge") == 1.006
    assert table.price("us-east-1", "no.such") is None
