"""Staging a sharded data set from S3: spotrun's stager against `aws s3 cp --recursive`.

    pip install awscli   # the AWS CLI v1, into the same venv
    PYTHONPATH=. python bench/staging_throughput.py [--gb 2] [--repeats 3]

One moto S3 server on loopback holds a data set pushed with spotrun's own `data push` (a
synthetic ImageFolder of ~110 kB files, ImageNet's average, packed into 256 MB tar shards).
Each round, side by side, into fresh folders on the same disk:

- spotrun: `stage` (parallel GETs, sha256 of every shard checked against the manifest, each
  shard extracted into place as it streams: the ImageFolder is ready when it returns);
- aws-cli: `aws s3 cp --recursive` of the same shards, default settings (10 requests at once,
  objects over 8 MB fetched as 8 MB ranged GETs); only the .tar files land, nothing is checked
  or extracted;
- aws-cli + tar: the same, then `tar xf` of each shard, which is what a user needs before
  training can start.

Medians over the rounds, and the ratios. A note on moto: it answers a ranged GET by reading
the whole object (under a per-object lock), so range splitting costs there what it saves on
S3; the stager is therefore run with whole-object GETs here (--min-part-mb default 1024), and
the CLI's own ranged GETs are counted as they are, which the figures state.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spotrun.cloud.aws.datasets import S3Store  # noqa: E402
from spotrun.datasets.pack import push  # noqa: E402
from spotrun.datasets.spec import parse_s3  # noqa: E402
from spotrun.datasets.stager import StageOptions, stage  # noqa: E402
from tests.lab.lab import FAKE_CREDENTIALS, REGION, MotoServer  # noqa: E402

FILE_BYTES = 110_000
CLASSES = 100


def make_folder(root: Path, total_bytes: int) -> int:
    """A synthetic ImageFolder of random-byte '.jpg' files (the stager never decodes them)."""
    files = total_bytes // FILE_BYTES
    per_class = max(1, files // CLASSES)
    for split, count in (("train", per_class), ("val", max(1, per_class // 50))):
        for c in range(CLASSES):
            folder = root / split / f"n{c:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                (folder / f"{i:06d}.jpg").write_bytes(os.urandom(FILE_BYTES))
    return sum(1 for _ in root.rglob("*.jpg"))


def aws_cli() -> str:
    found = Path(sys.executable).parent / "aws"
    if found.exists():
        return str(found)
    which = shutil.which("aws")
    if which is None:
        sys.exit("the AWS CLI is not installed: pip install awscli")
    return which


def timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=2.0, help="size of the data set")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--streams", type=int, default=16, help="the stager's GETs in flight")
    parser.add_argument("--min-part-mb", type=int, default=1024)
    parser.add_argument("--work", type=Path, default=None, help="folder for the copies")
    args = parser.parse_args()

    server = MotoServer.shared()
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": server.url,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
        **FAKE_CREDENTIALS,
    }
    os.environ.update(env)
    work = Path(tempfile.mkdtemp(prefix="sr-stage-bench-", dir=args.work))
    try:
        bucket = "staging-bench"
        server.client("s3").create_bucket(Bucket=bucket)
        source = parse_s3(f"s3://{bucket}/imagenet-like")
        folder = work / "imagenet-like"
        files = make_folder(folder, int(args.gb * 1e9))
        pushed = push(
            S3Store(bucket), folder, source, shard_size=256 * 10**6, parallel=2, log=lambda _: None
        )
        shutil.rmtree(folder)
        size = pushed.manifest.size
        print(
            f"data set: {files:,} files, {len(pushed.manifest.shards)} shards, {size / 1e9:.2f} GB "
            f"(pushed in {pushed.seconds:.1f} s); moto S3 on {server.url}"
        )
        cli = aws_cli()
        options = StageOptions(
            streams=args.streams,
            min_part_bytes=args.min_part_mb << 20,
            reserve_bytes=0,
            log_every_s=3600,
        )
        times: dict[str, list[float]] = {"spotrun": [], "aws-cli": [], "aws-cli + tar": []}
        for round_ in range(args.repeats):
            dest = work / f"r{round_}"

            def ours(dest: Path = dest) -> None:
                stage(
                    S3Store(bucket, connections=args.streams),
                    source,
                    dest / "ours",
                    options,
                    log=lambda _: None,
                )

            def theirs(dest: Path = dest) -> None:
                subprocess.run(
                    [
                        cli,
                        "s3",
                        "cp",
                        "--recursive",
                        "--quiet",
                        f"s3://{bucket}/imagenet-like/",
                        str(dest / "cli"),
                    ],
                    env=env,
                    check=True,
                )

            def untar(dest: Path = dest) -> None:
                out = dest / "cli-x"
                out.mkdir()
                for shard in sorted((dest / "cli").glob("*.tar")):
                    subprocess.run(["tar", "xf", str(shard), "-C", str(out)], check=True)

            t_ours = timed(ours)
            t_cli = timed(theirs)
            t_tar = timed(untar)
            times["spotrun"].append(t_ours)
            times["aws-cli"].append(t_cli)
            times["aws-cli + tar"].append(t_cli + t_tar)
            print(
                f"round {round_ + 1}: spotrun {t_ours:.1f} s, aws-cli {t_cli:.1f} s, "
                f"aws-cli + tar {t_cli + t_tar:.1f} s"
            )
            shutil.rmtree(dest)
        print(f"\nmedians over {args.repeats} rounds, {size / 1e9:.2f} GB of shards:")
        med = {k: statistics.median(v) for k, v in times.items()}
        for name, seconds in med.items():
            print(f"  {name:<14} {seconds:6.1f} s  {size / seconds / 1e6:7.0f} MB/s")
        print(f"  spotrun / aws-cli (download only):  {med['aws-cli'] / med['spotrun']:.2f}x")
        print(f"  spotrun / aws-cli + tar (ready):    {med['aws-cli + tar'] / med['spotrun']:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
