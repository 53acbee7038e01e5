"""EC2's eventual consistency, pending state and ClientToken, as the lab models them, and
spotrun's provider living with them (issue 19: the first real launch must work)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from spotlab import Lab
from spotlab.fixtures import use_lab
from spotlab.lab import FAKE_CREDENTIALS
from spotrun.cloud.aws import AwsProvider
from spotrun.cloud.aws.network import ephemeral_public_key
from spotrun.cloud.base import InstanceRequest
from spotrun.core.config import Resources, load_settings
from tests.conftest import Env
from tests.helpers import wait_for


def _ec2(lab: Lab) -> Any:
    return boto3.client(
        "ec2",
        endpoint_url=lab.front.url,
        region_name="us-east-1",
        # as the lab's IAM user: the front enforces IAM (spotlab/iam.py)
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )


def _run_params(lab: Lab, token: str, instance_type: str = "c6i.large") -> dict[str, Any]:
    assert lab.network is not None
    return {
        "ImageId": lab.image_id,
        "InstanceType": instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "SubnetId": lab.network.subnets["us-east-1a"],
        "ClientToken": token,
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": [{"Key": "spotrun:run-id", "Value": token}]}
        ],
    }


def test_fresh_instances_are_unknown_then_pending_and_tokens_are_idempotent(
    make_lab: Callable[..., Lab],
) -> None:
    lab = make_lab(not_found_s=2.0, pending_s=4.0, bucket=False)
    ec2 = _ec2(lab)
    (made,) = ec2.run_instances(**_run_params(lab, "labtoken0001"))["Instances"]
    fresh = made["InstanceId"]
    by_tag = [{"Name": "tag:spotrun:run-id", "Values": ["labtoken0001"]}]

    # At once: unknown by id, for tags too, and absent from a filtered listing.
    with pytest.raises(ClientError) as caught:
        ec2.describe_instances(InstanceIds=[fresh])
    assert caught.value.response["Error"]["Code"] == "InvalidInstanceID.NotFound"
    assert fresh in caught.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as tagged:
        ec2.create_tags(Resources=[fresh], Tags=[{"Key": "k", "Value": "v"}])
    assert tagged.value.response["Error"]["Code"] == "InvalidInstanceID.NotFound"
    assert ec2.describe_instances(Filters=by_tag)["Reservations"] == []

    # The same token again: the first call's instance, nothing new; other parameters: refused.
    (again,) = ec2.run_instances(**_run_params(lab, "labtoken0001"))["Instances"]
    assert again["InstanceId"] == fresh
    with pytest.raises(ClientError) as mismatch:
        ec2.run_instances(**_run_params(lab, "labtoken0001", instance_type="m6i.large"))
    assert mismatch.value.response["Error"]["Code"] == "IdempotentParameterMismatch"
    assert len(lab.instances("labtoken0001")) == 1  # moto itself made one

    # Then known, pending for a while, then running.
    def state() -> str | None:
        try:
            reservations = ec2.describe_instances(InstanceIds=[fresh])["Reservations"]
        except ClientError:
            return None
        return str(reservations[0]["Instances"][0]["State"]["Name"])

    assert wait_for(state, timeout=30, what="EC2 to know the instance") == "pending"
    listed = ec2.describe_instances(Filters=by_tag)["Reservations"]
    assert [i["InstanceId"] for r in listed for i in r["Instances"]] == [fresh]
    wait_for(lambda: state() == "running", timeout=30, what="the instance to run")
    ec2.terminate_instances(InstanceIds=[fresh])


def test_provider_sees_its_fresh_instances_and_waits_for_ec2(
    env: Env, make_lab: Callable[..., Lab]
) -> None:
    # Windows long enough that every call spotrun makes right after RunInstances meets them.
    lab = make_lab(not_found_s=3.0, pending_s=5.0, bucket=False)
    with use_lab(env, lab):
        provider = AwsProvider(load_settings(env.home))
        (offer,) = provider.offers(Resources(instance_type="c6i.large", zone="us-east-1a"))
        # count=2 runs the all-or-nothing check, which describes the new ids at once
        launched = provider.launch(InstanceRequest("labfresh0001", offer, count=2))
        assert lab.front.consistency.not_found_answers >= 1  # EC2 did not know them yet
        # Tags ride on RunInstances (TagSpecifications): no CreateTags on a fresh id, which
        # EC2 would answer NotFound as the first test shows.
        assert "CreateTags" not in lab.front.actions
        seen = provider.describe("labfresh0001")  # EC2's filtered listing still leaves them out
        assert sorted(i.id for i in seen) == sorted(i.id for i in launched)
        assert all(i.is_live and i.run_id == "labfresh0001" for i in seen)
        # A repeated launch (a supervisor restarted after a crash) finds them: nothing new.
        again = provider.launch(InstanceRequest("labfresh0001", offer, count=2))
        assert sorted(i.id for i in again) == sorted(i.id for i in launched)
        assert len(lab.front.run_requests) == 1
        ready = provider.wait_ready(seen, 30)
        assert all(i.state == "running" for i in ready)
        ended = provider.terminate("labfresh0001")
        assert {i.state for i in ended} == {"terminated"}


def test_fresh_security_groups_key_pairs_and_volumes_are_unknown_for_a_while(
    make_lab: Callable[..., Lab],
) -> None:
    """EC2's eventual consistency reaches the resources around an instance too: a call naming
    a group, key pair or volume made a moment ago answers NotFound, EC2's code and message."""
    lab = make_lab(resource_not_found_s=3.0, bucket=False)
    assert lab.network is not None
    ec2 = _ec2(lab)
    group = ec2.create_security_group(
        GroupName="labfresh-group", Description="fresh", VpcId=lab.network.vpc_id
    )["GroupId"]
    key = ec2.import_key_pair(
        KeyName="labfresh-key", PublicKeyMaterial=ephemeral_public_key().encode()
    )["KeyName"]
    volume = ec2.create_volume(AvailabilityZone="us-east-1a", Size=1)["VolumeId"]
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("InvalidGroup.NotFound", lambda: ec2.describe_security_groups(GroupIds=[group])),
        ("InvalidKeyPair.NotFound", lambda: ec2.describe_key_pairs(KeyNames=[key])),
        ("InvalidVolume.NotFound", lambda: ec2.describe_volumes(VolumeIds=[volume])),
    ]
    for code, call in calls:
        with pytest.raises(ClientError) as caught:
            call()
        assert caught.value.response["Error"]["Code"] == code
    # A name is not an id: a listing by the group's name (the key pair's, too) is answered.
    by_name = [{"Name": "group-name", "Values": ["labfresh-key"]}]
    assert ec2.describe_security_groups(Filters=by_name)["SecurityGroups"] == []

    def known() -> bool:
        try:
            for _, call in calls:
                call()
        except ClientError:
            return False
        return True

    wait_for(known, timeout=30, what="EC2 to know the fresh resources")
    assert {code for _, code in lab.front.consistency.resource_not_found} == {
        code for code, _ in calls
    }
    lab.ec2.delete_security_group(GroupId=group)  # straight to moto: untagged, not spotrun's
    lab.ec2.delete_key_pair(KeyName=key)
    lab.ec2.delete_volume(VolumeId=volume)


def test_a_launch_whose_group_and_key_pair_are_unknown_for_3_s_still_launches(
    env: Env, make_lab: Callable[..., Lab]
) -> None:
    """The provider's launch makes the run's key pair and security group, then at once adds
    the SSH rule and asks RunInstances with both: it waits for EC2 to know them (boto3's
    key_pair_exists and security_group_exists waiters) instead of failing the launch."""
    lab = make_lab(resource_not_found_s=3.0, bucket=False)
    with use_lab(env, lab):
        provider = AwsProvider(load_settings(env.home))
        (offer,) = provider.offers(Resources(instance_type="c6i.large", zone="us-east-1a"))
        launched = provider.launch(InstanceRequest("labgroup0001", offer, count=1))
        assert [i.run_id for i in launched] == ["labgroup0001"]
        met = {code for _, code in lab.front.consistency.resource_not_found}
        assert {"InvalidGroup.NotFound", "InvalidKeyPair.NotFound"} <= met  # EC2 did not know
        # the SSH rule was added once EC2 knew the group, and the instance is in it
        (instance,) = lab.instances("labgroup0001")
        (group,) = instance["SecurityGroups"]
        (described,) = lab.ec2.describe_security_groups(GroupIds=[group["GroupId"]])[
            "SecurityGroups"
        ]
        assert [p["FromPort"] for p in described["IpPermissions"]] == [lab.hosts.ssh_port]
        ended = provider.terminate("labgroup0001")
        assert {i.state for i in ended} == {"terminated"}


def test_a_teardown_meeting_shutting_down_ends_the_run_and_its_network(
    env: Env, make_lab: Callable[..., Lab]
) -> None:
    """EC2 describes a terminating instance as shutting-down (code 32) for a while, a stopping
    one as stopping (64); moto ends them at once. A run whose instance EC2 is reclaiming is
    torn down: the instance is no longer live, nothing is left billing, the network goes."""
    lab = make_lab(shutting_down_s=4.0, bucket=False)
    with use_lab(env, lab):
        provider = AwsProvider(load_settings(env.home))
        (offer,) = provider.offers(Resources(instance_type="c6i.large", zone="us-east-1a"))
        (instance,) = provider.launch(InstanceRequest("labending001", offer, count=1))
        wait_for(lambda: provider.describe("labending001")[0].state == "running", 30, "running")
        lab.interruptions.reclaim(instance.id)  # EC2 takes it back: shutting-down first

        (seen,) = provider.describe("labending001")
        assert seen.state == "shutting-down" and not seen.is_live and not seen.is_stopped
        ended = provider.terminate("labending001")

        assert all(i.state in ("shutting-down", "terminated") for i in ended)
        assert lab.front.consistency.transitional_answers >= 1
        assert lab.instances("labending001", states=("pending", "running", "stopping")) == []
        run_filter = [{"Name": "tag:spotrun:run-id", "Values": ["labending001"]}]
        assert lab.ec2.describe_security_groups(Filters=run_filter)["SecurityGroups"] == []
        wait_for(
            lambda: provider.describe("labending001")[0].state == "terminated",
            30,
            "EC2 to finish terminating it",
        )
