"""Remote data in the lab: `data push` to moto S3, a run whose job stages it on its sshd host
(into the host's own disk, checked against the manifest) and trains on it; bad data refused
at launch before anything exists."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import boto3
import pytest

from spotlab import Lab
from spotlab.lab import FAKE_CREDENTIALS
from spotrun.core.config import load_settings
from spotrun.core.errors import UsageError
from spotrun.service import runs as api
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for
from tests.unit.train.data.images import make_image_folder

pytestmark = pytest.mark.slow

TINY_IMAGE_RECIPE = [
    "model=cifar-fastnet",
    'model_options={"widths": [8, 8, 8]}',
    "num_classes=3",
    "batch_size=4",
    "epochs=1",
    "threads=1",
    "data_workers=0",
]


def _status(env: Env, ref: str) -> dict[str, Any]:
    return json.loads(env.cli("status", ref, "--json", check=True).stdout)


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".spotrun-stage" not in p.parts
    }


def test_push_a_folder_then_a_run_stages_it_on_the_instance_and_trains(
    aws_env: Env, lab: Lab, tmp_path: Path
) -> None:
    env = aws_env
    folder = make_image_folder(tmp_path / "pets", per_class=6, per_class_test=2, size=12).root
    uri = f"s3://{lab.bucket}/sets/pets"
    pushed = env.cli("data", "push", str(folder), uri, "--shard-size", "1MB", check=True)
    assert f"pushed {uri}" in pushed.stdout and f"--set data={uri}" in pushed.stdout
    (row,) = json.loads(env.cli("data", "ls", "--json", check=True).stdout)
    assert row["uri"] == uri and row["files"] == 24 and row["shards"] == 2

    run_id = env.cli(
        "launch", "digits-fast", "--cloud", "aws", "-d",
        *[x for item in [f"data={uri}", *TINY_IMAGE_RECIPE] for x in ("--set", item)],
        check=True,
    ).stdout.strip()  # fmt: skip
    wait_for(
        lambda: env.run_state(run_id) in ("succeeded", "failed"), timeout=150, what="the run to end"
    )
    status = _status(env, run_id)
    events = [e["message"] for e in status["events"]]
    assert status["state"] == "succeeded", (status["message"], events)
    assert status["metrics"]["epoch"] == 1

    # Staged on the host's own disk (its root volume: the lab's hosts have no instance store),
    # byte for byte the folder that was pushed.
    (item,) = lab.instances(run_id)
    host = lab.hosts.of(item["InstanceId"])
    staged = host.path(f"/root/.spotrun/spotrun-data/{lab.bucket}/sets/pets")
    assert _files(staged) == _files(folder)
    assert not (env.home / "spotrun-data").exists()  # nothing was staged on this machine

    # Progress went to the job's log, events, and the run's staging record (time and bytes).
    log = env.cli("logs", run_id, check=True).stdout
    assert f"spotrun: staging {uri} to the root volume" in log
    assert any(e.startswith(f"staged {uri}") for e in events), events
    staging = status["staging"]
    assert staging["stagings"] == 1 and staging["state"] == "done"
    assert staging["fetched_bytes"] == staging["data_bytes"] > 24 * 12 * 12
    assert 0 < staging["seconds"] < 60

    # The cost report prices the staging time with the run's own bill.
    (cost,) = json.loads(env.cli("cost", run_id, "--json", check=True).stdout)
    assert cost["staging_s"] == pytest.approx(staging["seconds"], abs=0.1)
    with Ledger(load_settings(env.home)) as ledger:
        (row,) = api.cost_report(ledger, run_id).rows
    assert row.staging is not None and 0 < row.staging.usd < row.amounts.total
    assert "of instance time while its data was staged" in env.cli("cost", run_id).stdout


def test_remote_data_that_cannot_be_staged_is_refused_at_launch(aws_env: Env, lab: Lab) -> None:
    env = aws_env
    # A snapshot that exists, but in another region than the run's (made straight in moto,
    # by someone else: the lab's user may not create snapshots)
    west = boto3.session.Session(**{k.lower(): v for k, v in FAKE_CREDENTIALS.items()}).client(
        "ec2", region_name="us-west-2", endpoint_url=lab.moto.url
    )
    volume = west.create_volume(Size=1, AvailabilityZone="us-west-2a")
    elsewhere = west.create_snapshot(VolumeId=volume["VolumeId"])["SnapshotId"]
    cases = {
        f"s3://{lab.bucket}/never-pushed": "nothing is stored under that prefix",
        "s3://no-such-bucket-here/x": "S3 bucket 'no-such-bucket-here' does not exist",
        "s3://Bad_Name/x": "is not an S3 bucket name",
        f"snapshot:{elsewhere}": f"snapshot {elsewhere} is in us-west-2, not in us-east-1",
        "snapshot:snap-xyz": "is not an EBS snapshot id",
    }
    for data, message in cases.items():
        with pytest.raises(UsageError, match=re.escape(message)):
            api.prepare_launch(
                load_settings(env.home),
                "digits-fast",
                api.LaunchRequest(cloud="aws"),
                overrides=[f"data={data}"],
            )
    # Through the CLI: exit 2, the message, and nothing made.
    result = env.cli(
        "launch", "digits-fast", "--cloud", "aws", "-d", "--set", f"data=snapshot:{elsewhere}"
    )
    assert result.returncode == 2 and "is in us-west-2" in result.stderr, result.stderr
    assert lab.instances() == []
    assert env.runs() == []


def test_snapshot_data_gets_a_tagged_volume_in_the_zone_deleted_at_the_end(
    aws_env: Env, lab: Lab
) -> None:
    """The EC2 side of snapshot data: a volume from the snapshot, in the instance's zone, tagged
    as the run's, attached to its instance, priced, and detached and deleted when the run ends.
    (The lab's hosts have no block devices: mounting it is tested with a loop device in
    tests/unit/datasets/test_snapshot_mount.py.)"""
    env = aws_env
    source = lab.ec2.create_volume(Size=3, AvailabilityZone="us-east-1a")
    snapshot_id = lab.ec2.create_snapshot(VolumeId=source["VolumeId"])["SnapshotId"]
    run_id = env.cli(
        "launch", "digits-fast", "--cloud", "aws", "-d", "--set", f"data=snapshot:{snapshot_id}",
        check=True,
    ).stdout.strip()  # fmt: skip

    def data_volume() -> dict[str, Any] | None:
        found = lab.ec2.describe_volumes(
            Filters=[{"Name": "tag:spotrun:run-id", "Values": [run_id]},
                     {"Name": "tag:spotrun:role", "Values": ["data"]}]
        )["Volumes"]  # fmt: skip
        return found[0] if found and found[0]["Attachments"] else None

    volume = wait_for(data_volume, timeout=90, what="the data volume to be attached")
    (item,) = lab.instances(run_id)
    assert volume["SnapshotId"] == snapshot_id and volume["Size"] == 3
    assert volume["AvailabilityZone"] == item["Placement"]["AvailabilityZone"]
    assert volume["Attachments"][0]["InstanceId"] == item["InstanceId"]
    tags = {t["Key"]: t["Value"] for t in volume["Tags"]}
    assert tags["spotrun:owner"] and tags["spotrun:expires"].endswith("Z")

    env.cli("stop", run_id, check=True)
    gone = lab.ec2.describe_volumes(Filters=[{"Name": "tag:spotrun:run-id", "Values": [run_id]}])[
        "Volumes"
    ]
    assert [v for v in gone if v["VolumeId"] == volume["VolumeId"]] == []
    status = _status(env, run_id)
    assert any(volume["VolumeId"] in e["message"] for e in status["events"])
    # Copy to the instance store or read in place: decided from the type's data, said why.
    placed = [e["message"] for e in status["events"] if " will be " in e["message"]]
    assert len(placed) == 1 and placed[0].startswith(f"snapshot:{snapshot_id} will be "), placed
    (inst,) = status["instances"]
    (data,) = [v for v in inst["details"]["volumes"] if v.get("role") == "data"]
    assert data["id"] == volume["VolumeId"] and data["size_gb"] == 3
    assert data["created_at"] <= data["deleted_at"]
    # Priced as EBS storage beside the root volume, for the time it existed.
    storage = [c for c in status["cost_lines"] if c["kind"] == "storage"]
    assert len(storage) == 2 and all(c["usd"] > 0 for c in storage), storage


def test_a_cache_volume_is_reattached_to_the_replacement_then_deleted(
    aws_env: Env, lab: Lab, tmp_path: Path
) -> None:
    """The EC2 side of `[aws] data_cache_volume`: a blank volume sized for the data set, tagged
    as the run's, attached in the instance's zone; after a spot interruption the replacement
    (same type and zone first) gets the same volume; it is priced, found by gc if left behind,
    and deleted when the run ends. (The lab's hosts have no block devices, so the job there
    stages without it after its wait; the mount and the skip of shards already on the volume
    are tested with a loop device in tests/unit/datasets/test_cache_volume.py.)"""
    env = aws_env
    lab.config.write_config(env.home, data_cache_volume=True)
    folder = make_image_folder(tmp_path / "pets", per_class=2, per_class_test=1, size=8).root
    uri = f"s3://{lab.bucket}/sets/cached"
    env.cli("data", "push", str(folder), uri, "--shard-size", "1MB", check=True)
    run_id = env.cli(
        "launch", "digits-fast", "--cloud", "aws", "-d", "--set", f"data={uri}",
        *[x for item in TINY_IMAGE_RECIPE for x in ("--set", item)],
        check=True,
    ).stdout.strip()  # fmt: skip

    def cache_volume(not_on: str | None = None) -> dict[str, Any] | None:
        found = lab.ec2.describe_volumes(
            Filters=[{"Name": "tag:spotrun:run-id", "Values": [run_id]},
                     {"Name": "tag:spotrun:role", "Values": ["data-cache"]}]
        )["Volumes"]  # fmt: skip
        attached = [v for v in found if v["Attachments"]]
        if len(found) == 1 and attached and attached[0]["Attachments"][0]["InstanceId"] != not_on:
            return attached[0]
        return None

    volume = wait_for(cache_volume, timeout=90, what="the cache volume to be attached")
    (first,) = lab.instances(run_id)
    assert volume["Size"] == 3 and not volume.get("SnapshotId")  # 1 GB for the set, 2 reserve
    assert volume["AvailabilityZone"] == first["Placement"]["AvailabilityZone"]
    assert volume["Attachments"][0]["Device"] == "/dev/sdg"
    tags = {t["Key"]: t["Value"] for t in volume["Tags"]}
    assert tags["spotrun:owner"] and tags["spotrun:expires"].endswith("Z")

    # The same type has no capacity left in the volume's zone: another type there comes
    # before the same type in another zone (where the volume could not follow).
    zone = volume["AvailabilityZone"]
    lab.faults.ec2("RunInstances", "InsufficientInstanceCapacity", zone=zone,
             instance_type=first["InstanceType"])  # fmt: skip
    lab.interruptions.interrupt(first["InstanceId"], notice_s=1.0)
    again = wait_for(
        lambda: cache_volume(not_on=first["InstanceId"]),
        timeout=120,
        what="the cache volume on the replacement",
    )
    assert again["VolumeId"] == volume["VolumeId"]  # the same volume, staged shards and all
    (second,) = [i for i in lab.instances(run_id) if i["InstanceId"] != first["InstanceId"]]
    assert second["Placement"]["AvailabilityZone"] == zone
    assert second["InstanceType"] != first["InstanceType"]
    events = [e["message"] for e in _status(env, run_id)["events"]]
    assert any(f"in {zone} first, where cache volume {volume['VolumeId']}" in e for e in events)
    assert any("(reused: its staged shards are kept)" in e for e in events), events

    # No capacity at all in that zone now: the next replacement goes to another one, on a
    # fresh volume (the old one is deleted: it could attach to nothing there).
    lab.faults.ec2("RunInstances", "InsufficientInstanceCapacity", zone=zone, times=None)
    lab.interruptions.interrupt(second["InstanceId"], notice_s=1.0)
    fresh = wait_for(
        lambda: cache_volume(not_on=second["InstanceId"]),
        timeout=120,
        what="a fresh cache volume on the replacement in another zone",
    )
    assert fresh["VolumeId"] != volume["VolumeId"] and fresh["AvailabilityZone"] != zone
    events = [e["message"] for e in _status(env, run_id)["events"]]
    assert any(f"(new: {volume['VolumeId']} in another zone was deleted" in e for e in events)

    env.cli("stop", run_id, check=True)
    left = lab.ec2.describe_volumes(Filters=[{"Name": "tag:spotrun:run-id", "Values": [run_id]}])
    assert [
        v for v in left["Volumes"] if v["VolumeId"] in (volume["VolumeId"], fresh["VolumeId"])
    ] == []
    status = _status(env, run_id)
    cached = [
        v
        for inst in status["instances"]
        for v in inst["details"].get("volumes", [])
        if v.get("role") == "data-cache"
    ]
    # One charge per instance that held it, back to back, never twice for the same time.
    first_volume = [v for v in cached if v["id"] == volume["VolumeId"]]
    assert len(cached) == 3 and len(first_volume) == 2, cached
    spans = sorted((v["created_at"], v["deleted_at"]) for v in first_volume)
    assert spans[0][1] <= spans[1][0] and spans[1][0] < spans[1][1]
    storage = [c for c in status["cost_lines"] if c["kind"] == "storage"]
    assert len(storage) == 6 and all(c["usd"] > 0 for c in storage), storage

    # A cache volume a crash left behind is found by gc by the run's tags.
    from spotrun.cloud.aws.network import run_tags
    from spotrun.cloud.aws.session import AwsClients
    from spotrun.cloud.aws.volumes import ensure_cache_volume

    settings = load_settings(env.home)
    tags_ = run_tags(run_id, settings.owner, 2e9)
    leaked = ensure_cache_volume(
        AwsClients(settings.aws), "us-east-1", "us-east-1a", 1, tags_, run_id
    )
    assert not leaked.reused
    with Ledger(settings) as ledger:
        report = api.gc(ledger, remove=True)
    ours = [o for o in report.orphans if o.run_id == run_id]
    assert [(o.kind, o.id) for o in ours] == [("volume", leaked.volume.id)]
    assert report.removed[ours[0]] is None
