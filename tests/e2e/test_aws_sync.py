"""Incremental pulls of a run folder from a lab host over SSH/SFTP: only new or changed files
move, growing logs move only their new bytes, and a restarted puller carries on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab.hosts import Host
from spotrun.cloud.aws import AwsProvider
from spotrun.core.config import load_settings
from spotrun.core.errors import RemoteError
from spotrun.remote.runner import Runner
from spotrun.remote.sync import pull_run_dir
from tests.conftest import Env
from tests.e2e.lab_instance import one_instance

RUN_ID = "sync00000001"


@pytest.fixture
def host(aws_env: Env, lab: Lab) -> Iterator[tuple[Runner, Host]]:
    with one_instance(aws_env.home, lab, RUN_ID) as both:
        yield both


def test_pull_moves_only_what_changed(host: tuple[Runner, Host], tmp_path: Path) -> None:
    host_runner, machine = host
    remote = "/root/.spotrun/runs/" + RUN_ID
    local = tmp_path / "run"
    sh = host_runner.run
    assert pull_run_dir(host_runner, remote, local, final=False).fetched == []  # not there yet
    with pytest.raises(RemoteError, match="missing on the instance"):
        pull_run_dir(host_runner, remote, local, final=True)

    sh(
        f"mkdir -p {remote}/checkpoints && printf 'line 1\\n' > {remote}/job.log && "
        f"head -c 200000 /dev/urandom > {remote}/checkpoints/ckpt-1.pt && "
        f"echo half > {remote}/checkpoints/ckpt-2.pt.tmp && echo mine > {remote}/.store.json"
    ).check("writing files")
    first = pull_run_dir(host_runner, remote, local, final=False)
    assert sorted(first.fetched) == ["checkpoints/ckpt-1.pt", "job.log"]
    assert first.whole_bytes == 200000 + 7
    on_host = machine.path(f"{remote}/checkpoints/ckpt-1.pt").read_bytes()
    assert (local / "checkpoints/ckpt-1.pt").read_bytes() == on_host

    sh(f"printf 'line 2\\n' >> {remote}/job.log").check("appending")
    second = pull_run_dir(host_runner, remote, local, final=False)
    assert second.fetched == ["job.log"]
    assert (second.appended_bytes, second.whole_bytes, second.unchanged) == (7, 0, 1)
    assert (local / "job.log").read_text() == "line 1\nline 2\n"

    # A new puller (a restarted supervisor) finds the state left in the run folder.
    assert pull_run_dir(host_runner, remote, local, final=True).fetched == []

    sh(f"head -c 1000 /dev/urandom > {remote}/checkpoints/ckpt-1.pt && rm {remote}/job.log").check(
        "changing"
    )
    third = pull_run_dir(host_runner, remote, local, final=True)
    assert third.fetched == ["checkpoints/ckpt-1.pt"] and third.whole_bytes == 1000
    assert (local / "job.log").exists()  # what the instance deleted stays here
    assert not (local / ".store.json").exists() and not list(local.rglob("*.tmp"))


def test_tensorboard_event_files_move_only_their_new_bytes(
    host: tuple[Runner, Host], tmp_path: Path
) -> None:
    host_runner, machine = host
    remote = "/root/.spotrun/runs/" + RUN_ID
    name = "events.out.tfevents.1796300000.host.42.0"
    local = tmp_path / "run"
    host_runner.run(f"mkdir -p {remote} && head -c 300 /dev/urandom > {remote}/{name}").check("")
    assert pull_run_dir(host_runner, remote, local, final=False).whole_bytes == 300
    host_runner.run(f"head -c 120 /dev/urandom >> {remote}/{name}").check("appending")
    grown = pull_run_dir(host_runner, remote, local, final=False)
    assert (grown.fetched, grown.appended_bytes, grown.whole_bytes) == ([name], 120, 0)
    assert (local / name).read_bytes() == machine.path(f"{remote}/{name}").read_bytes()


def test_durable_pull_fills_gaps_and_never_overwrites(
    aws_env: Env, lab: Lab, tmp_path: Path
) -> None:
    """What the instance's uploader put in S3 comes back when the instance cannot be synced,
    and never replaces a newer file the last sync brought."""
    assert lab.bucket
    prefix = "runs/durable00001/"
    lab.s3.put_object(
        Bucket=lab.bucket, Key=prefix + "checkpoints/ckpt-000000046.pt", Body=b"w" * 5000
    )
    lab.s3.put_object(
        Bucket=lab.bucket, Key=prefix + "metrics.jsonl", Body=b'{"epoch": 1, "step": 23}\n'
    )
    local = tmp_path / "run"
    local.mkdir()
    newer = '{"epoch": 1, "step": 23}\n{"epoch": 2, "step": 46}\n'  # from the last sync
    (local / "metrics.jsonl").write_text(newer)

    provider = AwsProvider(load_settings(aws_env.home))
    assert provider.pull_durable("durable00001", local) == ["checkpoints/ckpt-000000046.pt"]
    assert (local / "checkpoints/ckpt-000000046.pt").read_bytes() == b"w" * 5000
    assert (local / "metrics.jsonl").read_text() == newer
    assert provider.pull_durable("durable00001", local) == []
    assert not list(local.glob("*.part"))


def test_durable_pull_takes_metrics_that_grew_while_no_controller_synced(
    aws_env: Env, lab: Lab, tmp_path: Path
) -> None:
    """The laptop closed after the first evaluation: the instance evaluated on and its
    uploader stored them. The stored metrics.jsonl reaches a later step, so it is taken."""
    assert lab.bucket
    prefix = "runs/durable00002/"
    grown = "".join(f'{{"epoch": {e}, "step": {23 * e}}}\n' for e in (1, 2, 3))
    lab.s3.put_object(Bucket=lab.bucket, Key=prefix + "metrics.jsonl", Body=grown.encode())
    local = tmp_path / "run"
    local.mkdir()
    (local / "metrics.jsonl").write_text('{"epoch": 1, "step": 23}\n')  # synced before away

    provider = AwsProvider(load_settings(aws_env.home))
    assert provider.pull_durable("durable00002", local) == ["metrics.jsonl"]
    assert (local / "metrics.jsonl").read_text() == grown
    assert provider.pull_durable("durable00002", local) == []  # same step now: kept
