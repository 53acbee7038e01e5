"""The job's side of a remote data set: stage it before training, hand the trainer a path.

Runs in the training process on the instance (`spotrun train`, every torchrun rank): the first
rank to get the stager's lock stages, the others wait on it and find the set complete. Progress
goes to the job's output (job.log, what `spotrun logs` shows) and to RUN_DIR/staging.json,
which the controller turns into the run's events and its staging record.
"""

from __future__ import annotations

import os
from pathlib import Path

from spotrun.datasets.progress import STATUS_FILE
from spotrun.datasets.spec import LocalData, S3Data, SnapshotData, parse_data

RUN_DIR_ENV = "SPOTRUN_RUN_DIR"


def _say(line: str) -> None:
    print(f"spotrun: {line}", flush=True)


def local_data(text: str, home: Path, run_dir: Path | None = None) -> str:
    """The local `data` value for a recipe's `data`: itself, or where a remote set was staged."""
    spec = parse_data(text)
    if isinstance(spec, LocalData):
        return text
    if isinstance(spec, SnapshotData):
        from spotrun.datasets.snapshot_mount import mounted_path

        return str(mounted_path(spec))
    return str(stage_s3(spec, home, run_dir))


def stage_s3(spec: S3Data, home: Path, run_dir: Path | None = None) -> Path:
    from spotrun.cloud.aws.datasets import S3Store
    from spotrun.datasets.roots import stage_root
    from spotrun.datasets.stager import StageOptions, stage

    if run_dir is None and os.environ.get(RUN_DIR_ENV):
        run_dir = Path(os.environ[RUN_DIR_ENV])
    lead = os.environ.get("RANK", "0") == "0"
    root = stage_root(home, log=_say if lead else _quiet)
    options = StageOptions(
        streams=int(os.environ.get("SPOTRUN_STAGE_STREAMS", "32")),
        reserve_bytes=int(os.environ.get("SPOTRUN_STAGE_RESERVE_BYTES", str(1 << 30))),
        status_path=(run_dir / STATUS_FILE) if (run_dir is not None and lead) else None,
    )
    if lead:
        _say(f"staging {spec.uri} to the {root.kind} ({root.path})")
    result = stage(S3Store(spec.bucket), spec, root.path, options, log=_say if lead else _quiet)
    return result.dest


def _quiet(_line: str) -> None:
    return None
