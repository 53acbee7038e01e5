"""Bad input on --cloud aws: one clear line, exit 2, and nothing launched or left behind.
And `spotrun prices`, the table a launch chooses from."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from spotlab import Lab
from spotrun.cloud.aws import AwsProvider
from spotrun.cloud.base import InstanceRequest
from spotrun.core.config import Resources, load_settings
from spotrun.core.errors import UsageError
from spotrun.service import runs as api
from tests.conftest import Env
from tests.e2e.test_bad_input import assert_one_line_error
from tests.helpers import wait_for


def _nothing_made(env: Env, lab: Lab) -> None:
    ledger = env.home / "ledger.db"
    if ledger.exists():
        with sqlite3.connect(ledger) as db:
            assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)
    assert lab.instances() == []
    for action in ("RunInstances", "ImportKeyPair", "CreateSecurityGroup"):
        assert lab.front.actions.count(action) == 0, action


@pytest.mark.parametrize(
    ("resources", "settings", "fragments"),
    [
        ({"region": "mars-1"}, {}, ["unknown AWS region 'mars-1'"]),
        (
            {"gpus": 16},
            {},
            ["no instance type in us-east-1 has 16 GPUs", "GPU counts on offer: 1, ", ", 8"],
        ),
        ({"gpus": 1, "gpu_model": "Z9000"}, {}, ["has Z9000 GPUs", "GPU models on offer"]),
        ({"gpus": 1, "instance_type": "c6i.large"}, {}, ["c6i.large has no GPUs"]),
        ({"instance_type": "c6i.huge"}, {}, ["unknown instance type 'c6i.huge'"]),
        ({"zone": "us-east-1z"}, {}, ["cannot launch in zone 'us-east-1z'", "us-east-1a"]),
        (
            {},
            {"image_id": "ami-0123456789abcdef0"},
            ["image ami-0123456789abcdef0", "does not exist"],
        ),
        (
            {},
            {"image_ssm_parameter": "/no/such/parameter"},
            ["SSM parameter /no/such/parameter does not exist"],
        ),
        (
            {},
            {"bucket": "no-such-bucket-for-spotrun"},
            ["S3 bucket 'no-such-bucket-for-spotrun'", "does not exist"],
        ),
        ({}, {"subnet_ids": ["subnet-00000000"]}, ["subnet", "does not have"]),
    ],
)
def test_bad_input_is_refused_before_anything_exists(
    aws_env: Env,
    lab: Lab,
    resources: dict[str, Any],
    settings: dict[str, Any],
    fragments: list[str],
) -> None:
    """Validation against the real (lab) APIs, in this process; the CLI cases below show the
    same errors reach the user as one line with exit code 2."""
    if settings:
        lab.config.write_config(aws_env.home, **settings)
    with pytest.raises(UsageError) as caught:
        api.prepare_launch(
            load_settings(aws_env.home), "digits-fast", api.LaunchRequest(cloud="aws", **resources)
        )
    for fragment in fragments:
        assert fragment in caught.value.user_message()
    _nothing_made(aws_env, lab)


def _prewarmed_supervisors(home: Path) -> list[int]:
    """Supervisors started ahead of a launch (`--prewarm`) for this SPOTRUN_HOME."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--prewarm" in cmdline and f"SPOTRUN_HOME={home}".encode() in environ:
            found.append(int(proc.name))
    return found


def test_bad_input_on_the_command_line(aws_env: Env, lab: Lab) -> None:
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws", "--region", "us-east-9")
    assert_one_line_error(
        proc, 2, "unknown AWS region 'us-east-9'", "did you mean us-east-2, us-east-1"
    )
    lab.config.write_config(aws_env.home, image_id="ami-0123456789abcdef0")
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws")
    assert_one_line_error(proc, 2, "image ami-0123456789abcdef0", "does not exist")
    _nothing_made(aws_env, lab)
    # The supervisor that started ahead of the plan leaves once the launch is refused.
    wait_for(lambda: not _prewarmed_supervisors(aws_env.home), timeout=30, what="it to leave")


def test_no_credentials_launches_nothing(aws_env: Env, lab: Lab) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        aws_env.vars.pop(name)
    proc = aws_env.cli("launch", "digits-fast", "--cloud", "aws")
    assert_one_line_error(proc, 2, "no AWS credentials found", "aws configure")
    _nothing_made(aws_env, lab)


def test_prices_table(aws_env: Env, lab: Lab) -> None:
    lab.prices.set_on_demand("g5.xlarge", 1.0)  # the Pricing API answers for this one type
    proc = aws_env.cli("prices", "--min-gpus", "1", "--json", check=True)
    offers = json.loads(proc.stdout)
    prices = [o["spot_usd_per_hour"] for o in offers]
    assert prices == sorted(prices) and len(offers) == 15  # 5 GPU types x 3 zones
    exactly_one = json.loads(aws_env.cli("prices", "--gpus", "1", "--json", check=True).stdout)
    assert exactly_one and all(o["gpus"] == 1 for o in exactly_one)  # --gpus N: exactly N
    assert len(exactly_one) == sum(1 for o in offers if o["gpus"] == 1)
    first = offers[0]
    assert (first["instance_type"], first["zone"], first["gpu_model"]) == (
        "g4dn.xlarge",
        "us-east-1b",
        "T4",
    )
    g5 = next(o for o in offers if o["instance_type"] == "g5.xlarge")
    assert g5["on_demand_usd_per_hour"] == 1.0
    assert g5["saving_pct"] == pytest.approx(100 * (1 - g5["spot_usd_per_hour"]))
    assert all(o["gpus"] >= 1 for o in offers)

    only_a100 = json.loads(
        aws_env.cli("prices", "--gpus", "8", "--gpu-model", "a100", "--json", check=True).stdout
    )
    assert {o["instance_type"] for o in only_a100} == {"p4d.24xlarge"}

    text = aws_env.cli("prices", "--gpus", "4", check=True).stdout
    assert "g5.12xlarge" in text and "SAVING" in text
    assert "on-demand: the AWS Pricing API" in text
    # with credentials the prices are live ones, not the shipped catalog's
    assert "spot: EC2's current prices" in text and "shipped catalog" not in text

    proc = aws_env.cli("prices", "--gpus", "3", "--region", "mars-1")
    assert_one_line_error(proc, 2, "unknown AWS region")
    assert lab.instances() == []


def test_prices_fall_back_to_the_shipped_table(aws_env: Env, lab: Lab) -> None:
    # No price set in the lab's Pricing API: it refuses, as for credentials without pricing.
    text = aws_env.cli("prices", "--gpus", "1", check=True).stdout
    assert "on-demand: spotrun's shipped on-demand table of 2024-06-01" in text
    offers = json.loads(aws_env.cli("prices", "--gpus", "1", "--json", check=True).stdout)
    g5 = next(o for o in offers if o["instance_type"] == "g5.xlarge")
    assert g5["on_demand_usd_per_hour"] == 1.006
    assert lab.front.on_demand.calls == 1  # the refusal is remembered, not asked again


def test_public_addresses_are_asked_for_when_configured(aws_env: Env, lab: Lab) -> None:
    """ssh_address = "public": the instance gets a public address and spotrun would use it.
    (Nothing connects to it: the lab's network rule keeps all traffic on loopback.)"""
    lab.config.write_config(aws_env.home, ssh_address="public")
    provider = AwsProvider(load_settings(aws_env.home))
    (offer,) = provider.offers(Resources(instance_type="c6i.large", zone="us-east-1b"))
    (instance,) = provider.launch(InstanceRequest("public000001", offer))
    (item,) = lab.instances("public000001")
    assert item["PublicIpAddress"] and instance.address == item["PublicIpAddress"]
    (group,) = lab.ec2.describe_security_groups(
        GroupIds=[item["NetworkInterfaces"][0]["Groups"][0]["GroupId"]]
    )["SecurityGroups"]
    assert group["GroupName"] == "spotrun-public000001"
    (rule,) = group["IpPermissions"]
    assert [r["CidrIp"] for r in rule["IpRanges"]] == [f"{lab.front.public_address}/32"]
    provider.terminate("public000001")
