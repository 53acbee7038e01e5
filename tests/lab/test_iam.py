"""IAM in the lab (spotlab/iam.py): the README's policies, enforced on every request."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from spotlab import Lab
from spotlab.lab import CONTROLLER_PROFILE, FAKE_CREDENTIALS, INSTANCE_PROFILE
from spotrun.cloud.aws import AwsProvider
from spotrun.cloud.base import InstanceRequest
from spotrun.core.config import Resources, load_settings
from tests.conftest import Env
from tests.helpers import wait_for

NO_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1})


def _client(lab: Lab, service: str, key: str, secret: str, token: str | None = None) -> Any:
    return boto3.client(
        service,
        endpoint_url=lab.front.url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        aws_session_token=token,
        config=NO_RETRIES,
    )


def _as_user(lab: Lab, service: str) -> Any:
    return _client(
        lab,
        service,
        FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        FAKE_CREDENTIALS["AWS_SESSION_TOKEN"],
    )


def _code(call: Any) -> tuple[str, int]:
    with pytest.raises(ClientError) as caught:
        call()
    response = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def _role_credentials(lab: Lab, instance_id: str) -> dict[str, str] | None:
    url = lab.hosts.imds(instance_id).url
    put = urllib.request.Request(
        f"{url}/latest/api/token",
        method="PUT",
        headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"},
    )
    token = urllib.request.urlopen(put, timeout=5).read().decode()
    get = urllib.request.Request(
        f"{url}/latest/meta-data/iam/security-credentials/",
        headers={"X-aws-ec2-metadata-token": token},
    )
    try:
        role = urllib.request.urlopen(get, timeout=5).read().decode()
    except urllib.error.HTTPError as error:
        assert error.code == 404
        return None
    get = urllib.request.Request(
        f"{url}/latest/meta-data/iam/security-credentials/{role}",
        headers={"X-aws-ec2-metadata-token": token},
    )
    return dict(json.loads(urllib.request.urlopen(get, timeout=5).read()))


def test_the_user_may_do_what_the_policy_lists_and_nothing_else(lab: Lab) -> None:
    ec2, s3 = _as_user(lab, "ec2"), _as_user(lab, "s3")
    assert ec2.describe_regions()["Regions"]  # listed
    assert _code(ec2.describe_addresses) == ("UnauthorizedOperation", 403)
    assert _code(lambda: s3.create_bucket(Bucket=f"{lab.bucket}-other")) == ("AccessDenied", 403)
    s3.put_object(Bucket=lab.bucket, Key="runs/r1/metrics.jsonl", Body=b"{}\n")
    assert s3.get_object(Bucket=lab.bucket, Key="runs/r1/metrics.jsonl")["Body"].read() == b"{}\n"
    # an instance that is not a run's (no spotrun:run-id tag): the user may not end it
    assert lab.network is not None
    foreign = lab.ec2.run_instances(
        ImageId=lab.image_id,
        InstanceType="c6i.large",
        MinCount=1,
        MaxCount=1,
        SubnetId=lab.network.subnets["us-east-1a"],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "team", "Value": "x"}]}],
    )["Instances"][0]["InstanceId"]
    code = _code(lambda: ec2.terminate_instances(InstanceIds=[foreign]))
    assert code == ("UnauthorizedOperation", 403)
    assert lab.front.iam.denied == [
        f"arn:aws:iam::123456789012:user/spotrun-lab-user {action} {resource}"
        for action, resource in [
            ("ec2:DescribeAddresses", "*"),
            ("s3:CreateBucket", f"arn:aws:s3:::{lab.bucket}-other"),
            ("ec2:TerminateInstances", f"arn:aws:ec2:us-east-1:123456789012:instance/{foreign}"),
        ]
    ]
    lab.front.iam.denied.clear()
    # keys IAM does not know
    stranger = _client(lab, "ec2", "AKIANOBODYKNOWSTHIS1", "x")
    assert _code(stranger.describe_regions) == ("AuthFailure", 401)
    lab.ec2.terminate_instances(InstanceIds=[foreign])


def test_an_instance_role_ends_only_itself_and_writes_only_runs(aws_env: Env, lab: Lab) -> None:
    provider = AwsProvider(load_settings(aws_env.home))
    (offer,) = provider.offers(Resources(instance_type="c6i.large", zone="us-east-1a"))
    a, b = provider.wait_ready(provider.launch(InstanceRequest("iamroles0001", offer, count=2)), 20)
    creds = {i: _role_credentials(lab, i) for i in (a.id, b.id)}
    assert all(creds.values())  # both got the profile, not only the first (moto's habit)
    role_a = creds[a.id]
    assert role_a is not None and role_a["AccessKeyId"] != FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"]
    ec2 = _client(lab, "ec2", role_a["AccessKeyId"], role_a["SecretAccessKey"], role_a["Token"])
    s3 = _client(lab, "s3", role_a["AccessKeyId"], role_a["SecretAccessKey"], role_a["Token"])
    s3.put_object(Bucket=lab.bucket, Key="runs/iamroles0001/checkpoints/c.pt", Body=b"w")
    assert _code(lambda: s3.put_object(Bucket=lab.bucket, Key="elsewhere", Body=b"w"))[0] == (
        "AccessDenied"
    )
    assert _code(lambda: ec2.terminate_instances(InstanceIds=[b.id]))[0] == "UnauthorizedOperation"
    assert _code(ec2.describe_regions)[0] == "UnauthorizedOperation"  # not the user's rights
    assert len(lab.front.iam.denied) == 3
    lab.front.iam.denied.clear()
    ec2.terminate_instances(InstanceIds=[a.id])  # itself: allowed
    wait_for(lambda: not lab.hosts.of(a.id).alive, timeout=20, what="the instance to end itself")
    provider.terminate("iamroles0001")


def test_no_profile_no_credentials_and_passrole_is_checked(aws_env: Env, lab: Lab) -> None:
    lab.config.write_config(aws_env.home, instance_profile=None)
    provider = AwsProvider(load_settings(aws_env.home))
    (offer,) = provider.offers(Resources(instance_type="c6i.large", zone="us-east-1a"))
    (bare,) = provider.wait_ready(provider.launch(InstanceRequest("iamnoprof001", offer)), 20)
    assert _role_credentials(lab, bare.id) is None  # EC2 gives none without a profile
    provider.terminate("iamnoprof001")
    # a profile whose role the user's policy does not let it pass
    assert lab.network is not None
    ec2 = _as_user(lab, "ec2")
    lab.front.iam.profiles["admin-profile"] = "arn:aws:iam::123456789012:role/admin"
    call = lambda: ec2.run_instances(  # noqa: E731
        ImageId=lab.image_id,
        InstanceType="c6i.large",
        MinCount=1,
        MaxCount=1,
        SubnetId=lab.network.subnets["us-east-1a"],
        IamInstanceProfile={"Name": "admin-profile"},
    )
    assert _code(call) == ("UnauthorizedOperation", 403)
    assert lab.front.iam.denied == [
        "arn:aws:iam::123456789012:user/spotrun-lab-user iam:PassRole "
        "arn:aws:iam::123456789012:role/admin"
    ]
    lab.front.iam.denied.clear()
    assert INSTANCE_PROFILE in lab.front.iam.profiles


def test_a_controller_role_stops_only_itself_and_the_user_starts_only_controllers(
    lab: Lab,
) -> None:
    assert lab.network is not None
    user = _as_user(lab, "ec2")

    def made(role: str | None) -> str:
        tags = [{"Key": "spotrun:run-id", "Value": "iamctl"}]
        tags += [{"Key": "spotrun:role", "Value": role}] if role else []
        item = user.run_instances(
            ImageId=lab.image_id, InstanceType="c6i.large", MinCount=1, MaxCount=1,
            SubnetId=lab.network.subnets["us-east-1a"],  # type: ignore[union-attr]
            IamInstanceProfile={"Name": CONTROLLER_PROFILE},
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )["Instances"][0]  # fmt: skip
        return str(item["InstanceId"])

    a, b, run = made("controller"), made("controller"), made(None)
    for instance_id in (a, b, run):
        lab.hosts.wait_for(instance_id)
    role = wait_for(lambda: _role_credentials(lab, a), timeout=20, what="a's role session")
    ec2 = _client(lab, "ec2", role["AccessKeyId"], role["SecretAccessKey"], role["Token"])
    assert _code(lambda: ec2.stop_instances(InstanceIds=[b]))[0] == "UnauthorizedOperation"
    assert _code(lambda: ec2.stop_instances(InstanceIds=[run]))[0] == "UnauthorizedOperation"
    ec2.stop_instances(InstanceIds=[a])  # itself, tagged controller: allowed
    wait_for(lambda: not lab.hosts.of(a).alive, timeout=20, what="a's host to go down")
    lab.ec2.stop_instances(InstanceIds=[run])
    assert _code(lambda: user.start_instances(InstanceIds=[run]))[0] == "UnauthorizedOperation"
    assert len(lab.front.iam.denied) == 3
    lab.front.iam.denied.clear()
    user.start_instances(InstanceIds=[a])  # a controller instance: the user may start it
    wait_for(lambda: lab.hosts.of(a).alive, timeout=20, what="a's host to boot again")
    user.terminate_instances(InstanceIds=[a, b, run])


def test_a_request_that_names_no_action_is_no_permission_question(lab: Lab) -> None:
    """A request cut short (its sender killed while sending) names no Action: AWS answers
    MissingAction before authorizing anything, so the lab records no refusal for it."""
    from botocore.auth import SigV4Auth  # late: only this test signs by hand
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    keys = Credentials(
        FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        FAKE_CREDENTIALS["AWS_SESSION_TOKEN"],
    )
    headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    request = AWSRequest(method="POST", url=f"{lab.front.url}/", data=b"", headers=headers)
    SigV4Auth(keys, "ec2", "us-east-1").add_auth(request)
    sent = urllib.request.Request(
        request.url, data=b"", headers=dict(request.headers.items()), method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as answered:
        urllib.request.urlopen(sent, timeout=30)
    assert answered.value.code >= 400  # the service refuses it, as it is
    assert lab.front.iam.denied == []
    assert _code(_as_user(lab, "ec2").describe_addresses) == ("UnauthorizedOperation", 403)
    assert lab.front.iam.denied  # a named action outside the policy still is refused
    lab.front.iam.denied.clear()  # provoked on purpose (the fixture fails on any left)
