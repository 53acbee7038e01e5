"""The job's side of a remote data set: stage it before training, hand the trainer a path.

Runs in the training process on the instance (`spotrun train`, every torchrun rank): the first
rank to get the stager's lock stages, the others wait on it and find the set complete. Progress
goes to the job's output (job.log, what `spotrun logs` shows) and to RUN_DIR/staging.json,
which the controller turns into the run's events and its staging record.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from spotrun.core.errors import UsageError
from spotrun.core.lazy import lazy_module
from spotrun.core.rundir import (
    DATA_COPY_VAR,
    RUN_DIR_VAR,
    STAGE_RESERVE_BYTES_VAR,
    STAGE_STREAMS_VAR,
    STAGING_FILE,
)
from spotrun.datasets.feed import ShardFeed
from spotrun.datasets.layout import StageLayout
from spotrun.datasets.manifest import MANIFEST_NAME, read_manifest
from spotrun.datasets.roots import stage_root
from spotrun.datasets.snapshot_copy import copy_to_instance_store
from spotrun.datasets.snapshot_mount import mounted_path
from spotrun.datasets.spec import LocalData, S3Data, SnapshotData, parse_data
from spotrun.datasets.stager import StageOptions, stage
from spotrun.train.data.source import TRAIN_SPLIT

if TYPE_CHECKING:
    from spotrun.cloud.aws import datasets as s3_datasets
    from spotrun.datasets.objects import ObjectStore
else:
    s3_datasets = lazy_module("spotrun.cloud.aws.datasets")  # boto3 (~0.2 s): s3:// data only


def _say(line: str) -> None:
    print(f"spotrun: {line}", flush=True)


def local_data(text: str, home: Path, run_dir: Path | None = None) -> str:
    """The local `data` value for a recipe's `data`: itself, or where a remote set was staged."""
    spec = parse_data(text)
    if isinstance(spec, LocalData):
        return text
    if isinstance(spec, SnapshotData):
        mounted = mounted_path(spec)
        if os.environ.get(DATA_COPY_VAR) == "1":
            lead = os.environ.get("RANK", "0") == "0"
            return str(copy_to_instance_store(mounted, spec, _say if lead else _quiet))
        return str(mounted)
    return str(stage_s3(spec, home, run_dir))


def _options(run_dir: Path | None, lead: bool) -> StageOptions:
    if run_dir is None and os.environ.get(RUN_DIR_VAR):
        run_dir = Path(os.environ[RUN_DIR_VAR])
    return StageOptions(
        streams=int(os.environ.get(STAGE_STREAMS_VAR, "32")),
        reserve_bytes=int(os.environ.get(STAGE_RESERVE_BYTES_VAR, str(1 << 30))),
        status_path=(run_dir / STAGING_FILE) if (run_dir is not None and lead) else None,
    )


def stage_s3(spec: S3Data, home: Path, run_dir: Path | None = None) -> Path:
    lead = os.environ.get("RANK", "0") == "0"
    root = stage_root(home, log=_say if lead else _quiet)
    if lead:
        _say(f"staging {spec.uri} to the {root.kind} ({root.path})")
    log = _say if lead else _quiet
    store = s3_datasets.S3Store(spec.bucket)
    return stage(store, spec, root.path, _options(run_dir, lead), log=log).dest


def stage_s3_streaming(
    spec: S3Data, home: Path, store: ObjectStore | None = None, run_dir: Path | None = None
) -> ShardFeed:
    """Stage the evaluation split now and the training split in the background; the feed the
    loader reads training shards from as they arrive. Under torchrun the node's first rank
    (LOCAL_RANK 0) stages; the node's other ranks wait for its evaluation split, then follow
    its markers (spotrun.datasets.feed)."""
    stager = os.environ.get("LOCAL_RANK", "0") == "0"
    lead = os.environ.get("RANK", "0") == "0"
    say = _say if lead else _quiet
    store = store if store is not None else s3_datasets.S3Store(spec.bucket)
    root = stage_root(home, log=say)
    raw = store.read(spec.key(MANIFEST_NAME))
    if raw is None:
        raise UsageError(
            f"{spec.uri} has no manifest.json: training cannot start on its first shards",
            hint="push it as shards (spotrun data push), or drop stream_data",
        )
    manifest = read_manifest(raw, f"{spec.uri}/{MANIFEST_NAME}")
    feed = ShardFeed(StageLayout(root.path, spec), manifest, TRAIN_SPLIT)
    if not stager:
        feed.follow()
        feed.wait_prepared()
        return feed
    log = _say  # each node's stager speaks for its node
    options = _options(run_dir, lead)  # staging.json: the first node's only
    log(f"staging {spec.uri} to the {root.kind} ({root.path}); training starts on its first shards")
    stage(store, spec, root.path, options, log=log, splits=frozenset({manifest.eval_split}))
    feed.run_in_background(lambda: stage(store, spec, root.path, options, log=log))
    return feed


def _quiet(_line: str) -> None:
    return None
