"""What a run's instance keeps private (issue 38, point 12), in the lab: the run folder is 0700
and the job's files (job.log, metrics, checkpoints) 0600, read with os.stat on the lab host;
the instance metadata service answers one hop (containers on the instance cannot reach the
role's credentials), read from moto's describe_instances; and a run's security group, reused
after the caller's address changed, lets the new address in and the old one no more."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab.lab import REGION
from spotrun.cloud.aws import network
from spotrun.cloud.aws.session import AwsClients
from spotrun.core.config import aws_table
from tests.conftest import Env
from tests.helpers import wait_for

JOB = (
    'echo "{\\"epoch\\": 1}" >> "$SPOTRUN_RUN_DIR/metrics.jsonl"; '
    'echo saved > "$SPOTRUN_CHECKPOINT_DIR/ckpt-000000001.pt"; '
    "touch /tmp/job-started; while [ ! -e /tmp/job-release ]; do sleep 0.1; done"
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.slow
def test_the_run_folder_is_private_and_metadata_answers_one_hop(aws_env: Env, lab: Lab) -> None:
    launch = aws_env.cli(
        "launch", "--cmd", JOB, "--cloud", "aws", "--name", "private", "-d", timeout=300
    )
    assert launch.returncode == 0, launch.stderr
    run_id = launch.stdout.strip()
    instance = wait_for(lambda: lab.instances(run_id, states=("running",)), 180, "an instance")
    host = lab.hosts.wait_for(instance[0]["InstanceId"], timeout_s=60)
    wait_for(lambda: host.path("/tmp/job-started").exists(), 180, "the job to start")
    run_dir = host.path(f"/root/.spotrun/runs/{run_id}")
    assert _mode(run_dir) == 0o700
    assert _mode(run_dir / "checkpoints") == 0o700
    for name in ("job.log", "metrics.jsonl", "checkpoints/ckpt-000000001.pt"):
        assert _mode(run_dir / name) == 0o600, name
    options = instance[0]["MetadataOptions"]
    assert options["HttpPutResponseHopLimit"] == 1 and options["HttpTokens"] == "required"
    host.path("/tmp/job-release").touch()
    wait_for(
        lambda: [r for r in aws_env.runs() if r["id"] == run_id and r["state"] == "succeeded"],
        300,
        "the run to succeed",
    )


def _ssh_sources(lab: Lab, group_id: str) -> dict[str, str]:
    (group,) = lab.client("ec2").describe_security_groups(GroupIds=[group_id])["SecurityGroups"]
    return {
        str(r["CidrIp"]): str(r.get("Description", ""))
        for perm in group["IpPermissions"]
        for r in perm.get("IpRanges", [])
    }


def test_a_reused_security_group_follows_the_callers_address(lab: Lab) -> None:
    run_id = "sg-moves"
    tags = network.run_tags(run_id, "tester", time.time() + 3600)
    with lab.config.environ():
        before = AwsClients(aws_table(lab.config.settings(ssh_cidr="127.0.0.1/32")))
        subnet = next(iter(network.launch_subnets(before, REGION).values()))
        group_id = network.ensure_security_group(before, REGION, subnet, run_id, tags)
        port = before.settings.ssh_port
        lab.client("ec2").authorize_security_group_ingress(  # a rule of the user's own
            GroupId=group_id,
            IpPermissions=[
                {
                    "IpProtocol": "tcp",
                    "FromPort": port,
                    "ToPort": port,
                    "IpRanges": [{"CidrIp": "127.0.0.9/32", "Description": "mine"}],
                }
            ],
        )
        after = AwsClients(aws_table(lab.config.settings(ssh_cidr="127.0.0.2/32")))
        again = network.ensure_security_group(after, REGION, subnet, run_id, tags)
        assert again == group_id
        assert _ssh_sources(lab, group_id) == {
            "127.0.0.2/32": network.SSH_RULE,
            "127.0.0.9/32": "mine",
        }
        # the same address again changes nothing
        assert network.ensure_security_group(after, REGION, subnet, run_id, tags) == group_id
        assert set(_ssh_sources(lab, group_id)) == {"127.0.0.2/32", "127.0.0.9/32"}
