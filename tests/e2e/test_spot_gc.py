"""`spotrun gc` in the lab: what no live run owns is listed, then removed; a live run's
resources and other owners' resources are left alone."""

from __future__ import annotations

from spotlab import Lab
from spotrun.cloud.aws import AwsProvider, placement
from spotrun.cloud.base import InstanceRequest
from spotrun.core.config import LaunchSpec, Resources, load_settings
from spotrun.service import runs as api
from spotrun.store.ledger import Ledger
from tests.conftest import Env


def _make(provider: AwsProvider, run_id: str) -> str:
    offer = provider.offers(Resources())[0]
    (inst,) = provider.launch(InstanceRequest(run_id, offer))
    return inst.id


def test_gc_lists_then_removes_only_orphans(aws_env: Env, lab: Lab) -> None:
    env = aws_env
    settings = load_settings(env.home)
    provider = AwsProvider(settings)
    orphan_instance = _make(provider, "0rphan000001")  # a run this ledger does not know
    volume = lab.ec2.create_volume(
        AvailabilityZone="us-east-1a",
        Size=8,
        TagSpecifications=[
            {
                "ResourceType": "volume",
                "Tags": [
                    {"Key": "spotrun:run-id", "Value": "0rphan000001"},
                    {"Key": "spotrun:owner", "Value": settings.owner},
                ],
            }
        ],
    )["VolumeId"]
    theirs = lab.ec2.create_key_pair(
        KeyName="someone-elses",
        TagSpecifications=[
            {
                "ResourceType": "key-pair",
                "Tags": [
                    {"Key": "spotrun:run-id", "Value": "0ther0000001"},
                    {"Key": "spotrun:owner", "Value": "someone-else"},
                ],
            }
        ],
    )["KeyName"]

    group = placement.ensure_cluster_group(  # a multi-node run's cluster placement group
        provider.clients,
        "us-east-1",
        "us-east-1a",
        "0rphan000001",
        [
            {"Key": "spotrun:run-id", "Value": "0rphan000001"},
            {"Key": "spotrun:owner", "Value": settings.owner},
        ],
    )

    listed = env.cli("gc", check=True)
    for needle in (orphan_instance, volume, "spotrun-0rphan000001", "instance", "security-group"):
        assert needle in listed.stdout, listed.stdout
    assert theirs not in listed.stdout
    assert "spotrun gc --yes" in listed.stderr
    assert lab.instances("0rphan000001", states=("running",)), "listing removes nothing"

    with Ledger(settings) as ledger:
        live = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="aws"))
        live_instance = _make(provider, live.id)
        report = api.gc(ledger, remove=True)
    # (The moto server is shared by the test process: other tests' leftovers may show too.)
    ours = [o for o in report.orphans if o.run_id == "0rphan000001"]
    assert {o.kind for o in ours} == {
        "instance",
        "volume",
        "key-pair",
        "security-group",
        "placement-group",
    }
    assert live.id not in {o.run_id for o in report.orphans}
    assert all(report.removed[o] is None for o in ours), [
        (o.kind, o.region, report.removed[o]) for o in ours if report.removed[o]
    ]

    assert not lab.instances("0rphan000001", states=("pending", "running"))
    assert not lab.ec2.describe_volumes(
        Filters=[
            {"Name": "volume-id", "Values": [volume]},
            {"Name": "status", "Values": ["available"]},
        ]
    )["Volumes"]
    tagged = [{"Name": "tag:spotrun:run-id", "Values": ["0rphan000001"]}]
    assert not lab.ec2.describe_key_pairs(Filters=tagged)["KeyPairs"]
    assert not lab.ec2.describe_security_groups(Filters=tagged)["SecurityGroups"]
    assert group not in lab.front.placement.groups and group in lab.front.placement.deleted
    # The live run and the other owner keep theirs.
    (item,) = lab.instances(live.id)
    assert item["InstanceId"] == live_instance and item["State"]["Name"] == "running"
    assert lab.ec2.describe_key_pairs(KeyNames=[theirs])["KeyPairs"]
