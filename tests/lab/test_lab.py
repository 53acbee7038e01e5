"""The lab itself: what tests built on it may rely on (hosts per instance, their isolation,
IMDSv2, interruptions, injected faults)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

import pytest
from botocore.exceptions import ClientError

from spotlab import Lab
from spotlab.interruptions import SpotRequest
from spotlab.lab import FAKE_CREDENTIALS
from spotrun.cloud.aws import AwsProvider
from spotrun.cloud.base import InstanceRequest
from spotrun.core.config import Resources, load_settings
from tests.conftest import Env
from tests.helpers import wait_for


def _imds(url: str, path: str, token: str | None) -> tuple[int, str]:
    headers = {"X-aws-ec2-metadata-token": token} if token else {}
    request = urllib.request.Request(f"{url}/latest/{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def _token(url: str) -> str:
    request = urllib.request.Request(
        f"{url}/latest/api/token",
        method="PUT",
        headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.read().decode()


def test_hosts_follow_instances_isolated_with_imdsv2(aws_env: Env, lab: Lab) -> None:
    provider = AwsProvider(load_settings(aws_env.home))
    (offer,) = provider.offers(Resources(instance_type="c6i.large", zone="us-east-1a"))
    a, b = provider.wait_ready(provider.launch(InstanceRequest("labhosts0001", offer, count=2)), 20)
    run_a, run_b = provider.runner(a), provider.runner(b)
    assert a.address != b.address and a.address and a.address.startswith("127.")

    # Own /tmp, own home, own tmux server, own process tree.
    run_a.run("echo only-a > /tmp/mark && tmux new-session -d -s on-a 'sleep 300'").check("a")
    assert run_b.run("cat /tmp/mark").exit_code != 0
    assert "on-a" not in run_b.run("tmux list-sessions 2>&1").stdout
    assert "on-a" in run_a.run("tmux list-sessions").stdout
    assert run_a.run("ps -p 1 -o comm=").stdout.strip() == "sshd"  # its own PID namespace
    assert lab.hosts.of(a.id).path("/tmp/mark").read_text() == "only-a\n"

    # IMDSv2: a token first, every read with it.
    url = lab.hosts.imds(a.id).url
    assert _imds(url, "meta-data/instance-id", None)[0] == 401
    token = _token(url)
    assert _imds(url, "meta-data/instance-id", token) == (200, a.id)
    assert _imds(url, "meta-data/spot/instance-action", token)[0] == 404
    creds = json.loads(_imds(url, "meta-data/iam/security-credentials/spotrun-lab-role", token)[1])
    assert creds["Code"] == "Success"
    on_host = run_a.run(
        f"curl -s -H 'X-aws-ec2-metadata-token: {token}' {url}/latest/meta-data/instance-id"
    )
    assert on_host.stdout == a.id

    # Interruption: the notice now, then EC2 terminates it and everything on the host dies.
    lab.interruptions.interrupt(a.id, notice_s=0.5)
    notice = json.loads(_imds(url, "meta-data/spot/instance-action", token)[1])
    assert notice["action"] == "terminate"
    host_a = lab.hosts.of(a.id)
    wait_for(lambda: not host_a.alive, timeout=10, what="the interrupted host to die")
    (item,) = [i for i in lab.instances("labhosts0001") if i["InstanceId"] == a.id]
    assert item["State"]["Name"] == "terminated"
    assert item["StateReason"]["Code"] == "Server.SpotInstanceTermination"
    socket = host_a.path("/tmp/tmux-0/default")
    assert (
        subprocess.run(["tmux", "-S", str(socket), "list-sessions"], capture_output=True).returncode
        != 0
    )
    assert lab.hosts.of(b.id).alive

    # spotrun asks for one-time requests that EC2 ends by terminating (the lab's default
    # action); a request asking to stop (or hibernate) is stopped instead, with the notice
    # two minutes ahead in the lab's time, and its volumes kept.
    assert lab.front.spot_requests[a.id] == SpotRequest("one-time", "terminate")
    lab.time_scale = 1 / 60  # EC2's 120 s notice lasts 2 s here
    host_b, url_b = lab.hosts.of(b.id), lab.hosts.imds(b.id).url
    token_b = _token(url_b)
    before = time.time()
    lab.interruptions.interrupt(b.id, action="stop")
    notice = json.loads(_imds(url_b, "meta-data/spot/instance-action", token_b)[1])
    when = datetime.strptime(notice["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert notice["action"] == "stop"
    assert before + 1 <= when.timestamp() <= time.time() + 2  # 2 s ahead, whole seconds
    wait_for(lambda: not host_b.alive, timeout=30, what="the stopped host to die")
    (item,) = [i for i in lab.instances("labhosts0001") if i["InstanceId"] == b.id]
    assert item["State"]["Name"] == "stopped"
    assert item["StateReason"]["Code"] == "Server.SpotInstanceShutdown"
    assert lab.ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [b.id]}])[
        "Volumes"
    ]
    # The run's teardown ends a stopped instance too (it bills for its volumes).
    provider.terminate("labhosts0001")
    (item,) = [i for i in lab.instances("labhosts0001") if i["InstanceId"] == b.id]
    assert item["State"]["Name"] == "terminated"


def test_faults_are_real_ec2_errors_for_every_process(lab: Lab) -> None:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "ec2",
        endpoint_url=lab.front.url,
        region_name="us-east-1",
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],  # the lab's IAM user
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )
    # (DescribeRegions: an action the user's policy allows, so the fault and not IAM answers)
    fault = lab.faults.ec2("DescribeRegions", "RequestLimitExceeded", times=1)
    with pytest.raises(ClientError) as caught:
        client.describe_regions()
    assert caught.value.response["Error"]["Code"] == "RequestLimitExceeded"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert fault.hits == 1 and fault.times == 0
    assert client.describe_regions()["Regions"]  # then moto answers again
