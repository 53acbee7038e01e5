"""The AWS provider's pure parts: error mapping, quota names, idempotency tokens, times, the
code bundle, the shipped price table."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
from botocore.exceptions import ClientError, NoCredentialsError

from spotrun.cloud import gpu_catalog
from spotrun.cloud.aws.errors import fail_fast, translate, vcpu_quota_name, vcpu_refusal
from spotrun.cloud.aws.instances import client_token, ended_at
from spotrun.cloud.aws.quota_table import family_group, increase_hint, quota_of
from spotrun.cloud.base import Offer
from spotrun.cloud.pricing_table import shipped_table
from spotrun.core.errors import CapacityError, CloudError, QuotaError, UsageError, VcpuQuotaError
from spotrun.remote.provision import code_bundle


def _client_error(code: str, message: str = "m") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "RunInstances")


def _translate(exc: BaseException, **kw: object) -> Exception:
    return translate(exc, service="ec2", operation="RunInstances", region="us-east-1", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("code", ["InsufficientInstanceCapacity", "SpotMaxPriceTooLow"])
def test_capacity_codes_become_capacity_errors(code: str) -> None:
    err = _translate(_client_error(code, "no room"))
    assert isinstance(err, CapacityError) and err.message == f"{code}: no room"


def test_quota_and_permission_errors_name_what_to_raise() -> None:
    # EC2's answer to a spot request over the quota is a quota error, never capacity
    spot = _translate(_client_error("MaxSpotInstanceCountExceeded"), instance_type="g5.xlarge")
    assert isinstance(spot, VcpuQuotaError) and not isinstance(spot, CapacityError)
    assert spot.quota == "All G and VT Spot Instance Requests"
    assert "'All G and VT Spot Instance Requests' (L-3819A6DF) in us-east-1" in spot.message
    assert "servicequotas/home/services/ec2/quotas/L-3819A6DF" in spot.user_message()
    on_demand = _translate(
        _client_error("VcpuLimitExceeded"), instance_type="p5.48xlarge", spot=False
    )
    assert isinstance(on_demand, VcpuQuotaError)
    assert "'Running On-Demand P instances' (L-417A185B)" in on_demand.message
    sized = vcpu_refusal(
        "MaxSpotInstanceCountExceeded",
        region="eu-west-1",
        instance_type="p5.48xlarge",
        spot=True,
        needed=192,
        desired=200,
    )
    assert "cannot hold 192 vCPUs of p5.48xlarge" in sized.message
    assert (
        "`aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "
        "L-C4BD4855 --desired-value 200 --region eu-west-1`" in str(sized.hint)
    )
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


# AWS's "Amazon EC2 instance type quotas" page: (spot, on-demand) codes of each family group
GPU_QUOTA_CODES = {
    "g": ("L-3819A6DF", "L-DB2E81BA"),
    "p2-p4": ("L-7212CCBC", "L-417A185B"),
    "p5": ("L-C4BD4855", "L-417A185B"),
    "p6": (None, "L-417A185B"),  # no spot quota of P6's own on that page
}


def test_every_gpu_family_offered_has_its_spot_and_on_demand_quota() -> None:
    """Every family of the shipped GPU catalog (the types `prices` and a launch search) maps
    to its spot and on-demand quota; a P6 spot quota is named with no invented code, and its
    hint points at the Service Quotas console's EC2 list."""
    catalog = json.loads((Path(gpu_catalog.__file__).parent / "gpu_catalog.json").read_text())
    groups = {}
    for instance_type in catalog["types"]:
        group = family_group(instance_type)
        assert group in GPU_QUOTA_CODES, instance_type
        spot, on_demand = quota_of(instance_type, True), quota_of(instance_type, False)
        assert spot is not None and on_demand is not None
        assert (spot.code, on_demand.code) == GPU_QUOTA_CODES[group], instance_type
        groups[instance_type.split(".")[0]] = group
    assert groups["p5"] == groups["p5en"] == "p5" and groups["gr6"] == groups["g7e"] == "g"
    assert groups["p3dn"] == groups["p4de"] == "p2-p4"
    p6 = quota_of("p6-b200.48xlarge", True)
    assert p6 is not None and "L-" not in increase_hint(p6, "us-east-1", 192)
    assert "servicequotas/home/services/ec2/quotas?region=us-east-1" in increase_hint(
        p6, "us-east-1", 192
    )


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
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert "spotrun/provision/provision.sh" in names and "spotrun/cli/main.py" in names
    # No bytecode of this checkout's: only bytecode made from the archive's own sources, which
    # python checks against its source's hash at each import (spotrun/remote/provision.py)
    for name, data in files.items():
        if "__pycache__" in name or name.endswith((".pyc", ".pyo")):
            folder, _, pyc = name.partition("/__pycache__/")
            source = files[f"{folder}/{pyc.split('.')[0]}.py"]
            assert data[:4] == importlib.util.MAGIC_NUMBER and data[4:8] == b"\x03\0\0\0", name
            assert data[8:16] == importlib.util.source_hash(source), name
    code_bundle.cache_clear()
    assert code_bundle().digest == bundle.digest


def test_shipped_table_states_its_date() -> None:
    table = shipped_table()
    assert table.as_of == "2024-06-01" and "2024-06-01" in table.label
    assert table.price("us-east-1", "g5.xlarge") == 1.006
    assert table.price("us-east-1", "no.such") is None
