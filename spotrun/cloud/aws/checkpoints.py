"""S3, the durable store of a run's checkpoints: the instance uploads, the controller pulls.

On the instance, `python -m spotrun.cloud.aws.checkpoints push ...` uploads new or changed
checkpoints (and metrics.jsonl) under s3://BUCKET/runs/RUN_ID/; with --watch it keeps doing so
until the job has ended. On a replacement instance, `... store fetch ...` downloads the newest
stored checkpoint that reads back whole (the replacement resumes from it: a big checkpoint
comes from S3 in the region, not from the controller's uplink). The instance gets its
permissions from its instance profile (read through IMDSv2 by boto3), never from credentials
copied to it. The controller pulls what it does not have with `pull`, e.g. when the instance is
gone before its last sync.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from spotrun.cloud.aws.errors import aws_call, error_code
from spotrun.core.checkpoint_files import checkpoint_is_complete
from spotrun.core.errors import CloudError, UsageError
from spotrun.core.lazy import lazy_module
from spotrun.core.rundir import (
    CHECKPOINT_NAME,
    CHECKPOINTS_DIR,
    DURABLE_STATE_FILE,
    EXIT_FILE,
    METRICS_FILE,
    RECIPE_FILE,
    is_event_file,
)
from spotrun.core.safe_paths import safe_join
from spotrun.core.waiting import repeat

if TYPE_CHECKING:
    import boto3.exceptions as boto3_errors
    import boto3.session as boto3_session
    import botocore.config as botocore_config
else:
    # boto3 and its S3 client (~0.5 s of CPU): the instance's pusher loads them at its first
    # upload, and a job that writes nothing durable (an own command without checkpoints or
    # metrics) never makes one
    boto3_errors = lazy_module("boto3.exceptions")
    boto3_session = lazy_module("boto3.session")
    botocore_config = lazy_module("botocore.config")

# What the durable store keeps: the checkpoints, these files, and TensorBoard's event files.
CHECKPOINTS_PREFIX = CHECKPOINTS_DIR + "/"
DURABLE_FILES = (METRICS_FILE, RECIPE_FILE)


def run_prefix(run_id: str) -> str:
    return f"runs/{run_id}/"


def s3_client(region: str) -> Any:
    """An S3 client for the instance's own calls (its instance profile's credentials)."""
    retries = {"mode": "standard", "total_max_attempts": 8}
    config = botocore_config.Config(region_name=region, retries=retries)
    return boto3_session.Session().client("s3", config=config)


class ClientAtFirstUse:
    """s3_client(region), made when first used."""

    def __init__(self, region: str) -> None:
        self.region = region
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            self._client = s3_client(self.region)
        return getattr(self._client, name)


def check_bucket(s3: Any, bucket: str, region: str) -> None:
    """A UsageError unless the bucket exists and these credentials may use it."""
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as exc:
        code = error_code(exc)
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise UsageError(
                f"S3 bucket '{bucket}' (aws.bucket) does not exist",
                hint="create it, or remove aws.bucket from config.toml",
            ) from exc
        if code in ("403", "AccessDenied", "Forbidden"):
            raise UsageError(
                f"S3 bucket '{bucket}' (aws.bucket) is not accessible with these credentials",
                hint="grant s3:ListBucket, s3:GetObject and s3:PutObject on it",
            ) from exc
        with aws_call("s3", "HeadBucket", region):
            raise
    except BotoCoreError as exc:
        with aws_call("s3", "HeadBucket", region):
            raise exc


def _durable_files(run_dir: Path) -> Iterator[tuple[str, Path]]:
    # os.walk, not rglob: a folder the job made too deep to open (ENAMETOOLONG) or took away
    # mid-walk is passed over (its onerror is None) instead of ending every later push
    found = []
    for folder, _dirs, names in os.walk(run_dir):
        found += [Path(folder) / name for name in names]
    for item in sorted(found):
        if not item.is_file() or item.name.endswith((".tmp", ".part")):
            continue
        rel = item.relative_to(run_dir).as_posix()
        if rel.startswith(CHECKPOINTS_PREFIX) or rel in DURABLE_FILES or is_event_file(rel):
            yield rel, item


@dataclass(frozen=True)
class PushResult:
    uploaded: list[str]


def push(s3: Any, bucket: str, run_id: str, run_dir: Path, region: str) -> PushResult:
    """Upload the run's durable files that changed since the last push."""
    state_path = run_dir / DURABLE_STATE_FILE
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        state = {}
    uploaded = []
    for rel, path in _durable_files(run_dir):
        info = path.stat()
        mark = [info.st_size, info.st_mtime]
        if state.get(rel) == mark:
            continue
        with aws_call("s3", "PutObject", region):
            try:
                s3.upload_file(str(path), bucket, run_prefix(run_id) + rel)
            except boto3_errors.S3UploadFailedError as exc:  # SlowDown past the retries
                raise CloudError(f"storing {rel} in s3://{bucket} failed: {exc}") from exc
        state[rel] = mark
        uploaded.append(rel)
    if uploaded:
        tmp = state_path.with_name(DURABLE_STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, state_path)
    return PushResult(uploaded)


def pull(s3: Any, bucket: str, run_id: str, local_dir: Path, region: str) -> list[str]:
    """Download the run's stored files that are missing here, and metrics.jsonl where the
    stored one reaches a later step than this machine's.

    Other files already here are kept: what the last sync brought from the instance is at
    least as new as what the uploader stored. metrics.jsonl is the exception because it grows
    on the instance while no controller syncs (the laptop closed): then the stored copy is
    the newer one, and resuming from it keeps the evaluations made in the meantime."""
    prefix = run_prefix(run_id)
    fetched = []
    with aws_call("s3", "ListObjectsV2", region):
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        objects = [obj for page in pages for obj in page.get("Contents", [])]
    for obj in objects:
        rel = obj["Key"][len(prefix) :]
        if not rel or rel.endswith("/"):
            continue
        target = safe_join(local_dir, rel, what=f"stored file s3://{bucket}/{obj['Key']}")
        if target.exists() and rel != METRICS_FILE:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".part")
        with aws_call("s3", "GetObject", region):
            s3.download_file(bucket, obj["Key"], str(tmp))
        if target.exists() and last_step(tmp) <= last_step(target):
            tmp.unlink()
            continue
        os.replace(tmp, target)
        fetched.append(rel)
    return fetched


def delete_run(s3: Any, bucket: str, run_id: str, region: str) -> int:
    """Delete every stored file of the run (`spotrun rm`); how many there were."""
    prefix = run_prefix(run_id)
    with aws_call("s3", "ListObjectsV2", region):
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        keys = [obj["Key"] for page in pages for obj in page.get("Contents", [])]
    for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
        batch = [{"Key": key} for key in keys[start : start + 1000]]
        with aws_call("s3", "DeleteObjects", region):
            answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        failed = answer.get("Errors") or []
        if failed:
            first = failed[0]
            raise CloudError(
                f"S3 kept {len(failed)} of run {run_id}'s stored files "
                f"(s3://{bucket}/{first.get('Key')}: {first.get('Code')} {first.get('Message')})",
                hint="check that the policy allows s3:DeleteObject on runs/*, then "
                f"`spotrun rm` again, or delete s3://{bucket}/{prefix} yourself",
            )
    return len(keys)


def last_step(metrics: Path) -> int:
    """The step of the last whole line of a metrics.jsonl (-1 when it holds none)."""
    step = -1
    for line in metrics.read_text(errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut by an upload in progress
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            step = max(step, row["step"])
    return step


@dataclass(frozen=True)
class Fetched:
    """What `fetch_checkpoint` put in place: the checkpoint's name and step (None: nothing
    stored was new enough and whole), the stored ones it found incomplete, the bytes it
    downloaded (the incomplete ones' too) and the region of the bucket they came from (the
    controller fills it in: the instance is told only where to ask)."""

    name: str | None
    step: int | None
    incomplete: list[str]
    # accounting, not what was put in place: two fetches of the same checkpoint are equal
    size_bytes: int = field(default=0, compare=False)
    store_region: str | None = field(default=None, compare=False)

    def to_json(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "step": self.step,
                "incomplete": self.incomplete,
                "bytes": self.size_bytes,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Fetched:
        data = json.loads(text)
        step = data.get("step")
        return cls(
            data.get("name"),
            int(step) if step is not None else None,
            data["incomplete"],
            int(data.get("bytes", 0)),  # an instance of an older version tells none
        )


def stored_checkpoints(s3: Any, bucket: str, run_id: str, region: str) -> list[tuple[str, int]]:
    """The run's checkpoints in the store, newest first: (file name, step)."""
    prefix = run_prefix(run_id) + CHECKPOINTS_PREFIX
    with aws_call("s3", "ListObjectsV2", region):
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        keys = [obj["Key"] for page in pages for obj in page.get("Contents", [])]
    found = []
    for key in keys:
        match = CHECKPOINT_NAME.fullmatch(key[len(prefix) :])
        if match:
            found.append((match.group(0), int(match.group(1))))
    return sorted(found, key=lambda item: item[1], reverse=True)


def fetch_checkpoint(
    s3: Any, bucket: str, run_id: str, run_dir: Path, region: str, at_least: int
) -> Fetched:
    """On a replacement instance: download the newest stored checkpoint of step `at_least` or
    later that reads back whole into run_dir/checkpoints/ (an incomplete one, e.g. an upload
    cut by the reclaim, is skipped for the one before it)."""
    folder = run_dir / CHECKPOINTS_PREFIX
    folder.mkdir(parents=True, exist_ok=True)
    incomplete = []
    downloaded = 0
    for name, step in stored_checkpoints(s3, bucket, run_id, region):
        if step < at_least:
            break
        target = folder / name
        tmp = target.with_name(name + ".part")
        with aws_call("s3", "GetObject", region):
            s3.download_file(bucket, run_prefix(run_id) + CHECKPOINTS_PREFIX + name, str(tmp))
        downloaded += tmp.stat().st_size
        if not checkpoint_is_complete(tmp):
            tmp.unlink(missing_ok=True)
            incomplete.append(name)
            continue
        os.replace(tmp, target)
        return Fetched(name, step, incomplete, downloaded)
    return Fetched(None, None, incomplete, downloaded)


def _job_ended_since(exit_file: Path, started: float) -> bool:
    """The job's exit record, if written after `started` (one left by an earlier job of a
    resumed run does not count)."""
    try:
        return exit_file.stat().st_mtime >= started - 1.0
    except FileNotFoundError:
        return False


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m spotrun.cloud.aws.checkpoints")
    sub = parser.add_subparsers(dest="op", required=True)
    p = sub.add_parser("push", help="upload new checkpoints of a run folder")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--region", required=True)
    p.add_argument("--watch", type=float, default=0.0, help="seconds between pushes; 0 = once")
    p.add_argument("--since", type=float, default=None, help="when it was started (epoch s)")
    f = sub.add_parser("fetch", help="download the newest whole stored checkpoint")
    f.add_argument("--run-dir", type=Path, required=True)
    f.add_argument("--run-id", required=True)
    f.add_argument("--bucket", required=True)
    f.add_argument("--region", required=True)
    f.add_argument("--at-least", type=int, default=0, help="the oldest step worth fetching")
    args = parser.parse_args(argv)
    if args.op == "fetch":
        try:
            fetched = fetch_checkpoint(
                s3_client(args.region),
                args.bucket,
                args.run_id,
                args.run_dir,
                args.region,
                args.at_least,
            )
        except CloudError as exc:
            print(f"store: {exc.user_message()}", file=sys.stderr, flush=True)
            return 1
        print(fetched.to_json(), flush=True)
        return 0
    started = args.since if args.since is not None else time.time()
    s3 = ClientAtFirstUse(args.region)
    failed = False

    def push_once() -> bool:
        """One push; whether to push again (--watch, until the job has ended)."""
        nonlocal failed
        ended = _job_ended_since(args.run_dir / EXIT_FILE, started)
        try:
            result = push(s3, args.bucket, args.run_id, args.run_dir, args.region)
        except CloudError as exc:
            print(f"store: {exc.user_message()}", file=sys.stderr, flush=True)
            failed = not args.watch
            # A burst (S3's SlowDown) outlasting one call's retries: the last push after the
            # job ended is tried again next round, not given up (flush bounds the wait).
            return bool(args.watch)
        if result.uploaded:
            print(f"store: uploaded {', '.join(result.uploaded)}", flush=True)
        return bool(args.watch) and not ended

    repeat(push_once, interval_s=args.watch)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
