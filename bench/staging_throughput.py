"""Staging a sharded data set from S3: spotrun's stager against `aws s3 cp --recursive`.

    pip install awscli   # the AWS CLI v1, into the same venv
    PYTHONPATH=. python bench/staging_throughput.py [--gb 2] [--repeats 4]

A moto S3 server (in a process of its own) on loopback holds a data set pushed with spotrun's
own `data push`: a synthetic ImageFolder of ~110 kB files (ImageNet's average size) packed
into 256 MB tar shards. Each round, side by side, into fresh folders on the same disk:

- spotrun: `stage` (parallel GETs, the CRC-32 of every shard checked against the manifest,
  each shard extracted into place as it streams: the ImageFolder is ready when it returns);
- aws-cli: `aws s3 cp --recursive` of the same shards with its default settings (10 requests
  at once; objects over 8 MB fetched as 8 MB ranged GETs). Only the .tar files land: nothing
  is checked or extracted;
- aws-cli whole: the same with `multipart_threshold = 4GB`, so it makes one GET per shard;
- "+ tar": each CLI copy followed by `tar xf` of every shard, which a user needs before
  training can start.

Where the copies land: by default (as root, with util-linux and e2fsprogs) a fresh ext4 file
system with its journal, on a loop device in a mount namespace of this process's own, as an
instance store formatted by the image would be. This machine's own root file system is ext4
*without* a journal, where the kernel checks every free inode it considers for a recent
deletion (find_inode_bit -> recently_deleted): after the many deletions of other jobs and of
the previous round, creating a file there cost ~0.4 ms of kernel time, up to 65% of a side's
CPU (perf), landing on whichever side ran after a deletion. `--target here` keeps the old
behaviour (copies under --work or /tmp).

Medians over the rounds, and the ratios; the CPU seconds per GB of the S3 server process and
of the client side (this process for spotrun; the CLI and tar as its children), which say what
each side costs the two shared cores whatever the load of the moment. The order alternates
and the rounds are even in number: whichever side runs second in a round has been measured
slower, both ways round (up to 5x the CPU, server and client; most likely reclaiming the page
cache of the first side's copies), so each side's copies are now deleted once it is measured,
after which the effect was no longer seen. About moto: it answers a ranged GET by reading the
whole object under a per-object lock, so ranged GETs cost there what they save on S3. The
stager therefore runs with whole-object GETs here (--min-part-mb 1024), and "aws-cli whole"
is the CLI without that penalty: the fair baseline.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from botocore.exceptions import EndpointConnectionError  # noqa: E402

from spotlab.lab import FAKE_CREDENTIALS, REGION, free_port  # noqa: E402
from spotrun.cloud.aws.datasets import S3Store  # noqa: E402
from spotrun.datasets.push import push  # noqa: E402
from spotrun.datasets.spec import parse_s3  # noqa: E402
from spotrun.datasets.stager import StageOptions, stage  # noqa: E402

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


@dataclass
class Cost:
    """One side's wall time and the CPU seconds it took: the S3 server's and the client's
    (the stager is this process; the CLI and tar are its children)."""

    wall: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.wall + other.wall,
            self.server_cpu + other.server_cpu,
            self.client_cpu + other.client_cpu,
        )


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far, all its threads (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_and_children_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the CLI and tar, once reaped
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(server_pid: int, fn: Callable[..., None], *args: Any) -> Cost:
    # The previous side's dirty pages are written back outside of this one's time; twice, since
    # the first sync of a loop file system dirties the pages of its image file on the disk.
    os.sync()
    os.sync()
    server, client = process_cpu(server_pid), own_and_children_cpu()
    start = time.perf_counter()
    fn(*args)
    wall = time.perf_counter() - start
    return Cost(wall, process_cpu(server_pid) - server, own_and_children_cpu() - client)


def cli_copy(cli: str, source: str, into: Path, env: dict[str, str]) -> None:
    subprocess.run(
        [cli, "s3", "cp", "--recursive", "--quiet", source, str(into)], env=env, check=True
    )


def untar(copy: Path, out: Path) -> None:
    out.mkdir()
    for shard in sorted(copy.glob("*.tar")):
        subprocess.run(["tar", "xf", str(shard), "-C", str(out)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=2.0, help="size of the data set")
    parser.add_argument(
        "--repeats", type=int, default=4, help="rounds, even: each side goes first in half"
    )
    parser.add_argument("--streams", type=int, default=16, help="the stager's GETs in flight")
    parser.add_argument("--min-part-mb", type=int, default=1024)
    parser.add_argument("--work", type=Path, default=None, help="folder for the copies")
    parser.add_argument(
        "--target",
        choices=["loop-ext4", "here"],
        default="loop-ext4" if _can_loop() else "here",
        help="a fresh journaled ext4 on a loop device (default as root), or --work as it is",
    )
    parser.add_argument(
        "--loop-direct-io",
        choices=["on", "off"],
        default="off",
        help="on: the loop device writes its image with O_DIRECT, so each side's writes meet "
        "this machine's shared virtual disk while it is timed (writeback throttling; an NVMe "
        "instance store is much faster); off: they land in the page cache, synced outside",
    )
    parser.add_argument(
        "--default-cli-rounds",
        type=int,
        default=1,
        help="rounds that also run the CLI with its default ranged GETs (slow on moto)",
    )
    args = parser.parse_args()
    if args.repeats < 2 or args.repeats % 2:
        # Whichever side runs second in a round has been measured slower (both ways round):
        # an odd count would let one side go first more often.
        parser.error("--repeats must be even (and at least 2)")
    if args.target == "loop-ext4" and not os.environ.get(IN_NAMESPACE):
        # Again, in a mount namespace of its own: the loop mount dies with the process.
        argv = ["unshare", "--mount", "--propagation", "private", sys.executable, *sys.argv]
        sys.exit(subprocess.run(argv, env={**os.environ, IN_NAMESPACE: "1"}).returncode)
    scratch = Path(tempfile.mkdtemp(prefix="sr-stage-fs-", dir=args.work))
    if args.target == "loop-ext4":
        # Each round holds the data set up to six times over: its tar shards twice (the CLI's
        # default and whole copies), the extracted tree three times (spotrun's and two of tar).
        copies = 6 if args.default_cli_rounds else 4
        size = int(args.gb * copies * 1e9) + (1 << 30)
        args.work = loop_ext4(scratch, size, direct_io=args.loop_direct_io == "on")
    dio = f", loop direct I/O {args.loop_direct_io}" if args.target == "loop-ext4" else ""
    print(f"copies on: {args.target} ({args.work or tempfile.gettempdir()}{dio})")
    try:
        run(args)
    finally:
        if args.target == "loop-ext4":
            subprocess.run(["umount", str(args.work)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)


IN_NAMESPACE = "SPOTRUN_BENCH_NAMESPACE"


def _can_loop() -> bool:
    tools = ("unshare", "mount", "umount", "mkfs.ext4", "losetup")
    return os.geteuid() == 0 and all(shutil.which(t) for t in tools)


def loop_ext4(scratch: Path, size: int, direct_io: bool = True) -> Path:
    """A fresh ext4 file system (with its journal) of `size` bytes, mounted; its folder."""
    image = scratch / "fs.img"
    # Written with zeros now: a sparse or fallocated image would make whichever side first
    # wrote a region of it pay the disk's allocation (the second side of a round, measured).
    block = bytes(64 << 20)
    with open(image, "wb") as fh:
        for _ in range(-(-size // len(block))):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    # Inode tables and journal written now, not by a kernel thread while a side is timed.
    init = "lazy_itable_init=0,lazy_journal_init=0"
    subprocess.run(["mkfs.ext4", "-q", "-F", "-E", init, str(image)], check=True)
    mount = scratch / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-o", "loop,noatime", str(image), str(mount)], check=True)
    # With direct I/O the loop device reads and writes its image with O_DIRECT, as an instance
    # store has no second page cache under its file system (else every byte is cached twice).
    if not direct_io:
        return mount
    device = subprocess.run(
        ["findmnt", "-n", "-o", "SOURCE", str(mount)], capture_output=True, text=True, check=True
    ).stdout.strip()
    dio = subprocess.run(["losetup", "--direct-io=on", device], capture_output=True, text=True)
    if dio.returncode != 0:
        print(f"note: {device} without direct I/O ({dio.stderr.strip()})")
    return mount


def run(args: argparse.Namespace) -> None:
    # moto in a process of its own: in this one it would share the stager's interpreter lock.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    moto = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": url,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
        **FAKE_CREDENTIALS,
    }
    os.environ.update(env)
    work = Path(tempfile.mkdtemp(prefix="sr-stage-bench-", dir=args.work))
    try:
        bucket = "staging-bench"
        store = S3Store(bucket)
        for _ in range(100):  # the server takes a moment to listen
            try:
                store.client.create_bucket(Bucket=bucket)
                break
            except EndpointConnectionError:  # refused until it listens
                time.sleep(0.1)
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
            f"(pushed in {pushed.seconds:.1f} s); moto S3 on {url}"
        )
        cli = aws_cli()
        options = StageOptions(
            streams=args.streams,
            min_part_bytes=args.min_part_mb << 20,
            reserve_bytes=0,
            log_every_s=3600,
        )
        whole_config = work / "aws-config"
        whole_config.write_text("[default]\ns3 =\n  multipart_threshold = 4GB\n")
        names = ["spotrun", "aws-cli", "aws-cli + tar", "aws-cli whole", "aws-cli whole + tar"]
        costs: dict[str, list[Cost]] = {name: [] for name in names}
        pid = moto.pid
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

            src = f"s3://{bucket}/imagenet-like/"
            whole_env = {**env, "AWS_CONFIG_FILE": str(whole_config)}
            none = Cost()
            c_ours = none
            # Each side's copies are deleted once it is measured (outside its time): its page
            # cache goes with them, so the next side starts with the memory this one had.
            if round_ % 2 == 0:  # the order alternates, so neither side always goes first
                c_ours = timed(pid, ours)
                shutil.rmtree(dest / "ours")
            with_default = round_ < args.default_cli_rounds
            c_cli = timed(pid, cli_copy, cli, src, dest / "cli", env) if with_default else none
            c_tar = timed(pid, untar, dest / "cli", dest / "cli-x") if with_default else none
            for done in ("cli", "cli-x"):
                shutil.rmtree(dest / done, ignore_errors=True)
            c_whole = timed(pid, cli_copy, cli, src, dest / "whole", whole_env)
            c_whole_tar = timed(pid, untar, dest / "whole", dest / "whole-x")
            for done in ("whole", "whole-x"):
                shutil.rmtree(dest / done)
            if round_ % 2 == 1:
                c_ours = timed(pid, ours)
            got = [c_ours, c_cli, c_cli + c_tar, c_whole, c_whole + c_whole_tar]
            measured = [(n, c) for n, c in zip(names, got) if c.wall > 0]
            for name, cost in measured:
                costs[name].append(cost)
            print(
                f"round {round_ + 1} (spotrun {'first' if round_ % 2 == 0 else 'last'}): "
                + ", ".join(
                    f"{n} {c.wall:.1f} s ({c.server_cpu:.1f} + {c.client_cpu:.1f} CPU-s)"
                    for n, c in measured
                )
            )
            shutil.rmtree(dest, ignore_errors=True)
        gb = size / 1e9
        print(
            f"\nmedians, {gb:.2f} GB of shards (rounds measured in brackets); CPU seconds per GB "
            "of the S3 server process and of the client (the stager; the CLI and tar):"
        )
        med: dict[str, float] = {}
        for name, got_costs in costs.items():
            if not got_costs:
                continue
            med[name] = seconds = statistics.median(c.wall for c in got_costs)
            server = statistics.median(c.server_cpu for c in got_costs) / gb
            client = statistics.median(c.client_cpu for c in got_costs) / gb
            print(
                f"  {name:<20} {seconds:6.1f} s  {size / seconds / 1e6:5.0f} MB/s  "
                f"server {server:4.2f} CPU-s/GB  client {client:4.2f} CPU-s/GB  "
                f"[{len(got_costs)}]"
            )
        for name in [n for n in names[1:] if n in med]:
            print(f"  speed-up of spotrun over {name + ':':<21} {med[name] / med['spotrun']:.2f}x")
        # On two shared cores the wall times follow the load; CPU seconds (server + client)
        # per GB say what each side costs the machine, and bound its speed on an idle one.
        total = {
            name: statistics.median(c.server_cpu + c.client_cpu for c in got) / gb
            for name, got in costs.items()
            if got
        }
        print("CPU seconds per GB, server + client (medians):")
        for name in [n for n in names[1:] if n in total]:
            print(
                f"  spotrun {total['spotrun']:.2f} vs {name} {total[name]:.2f}: "
                f"{total[name] / total['spotrun']:.2f}x"
            )
    finally:
        moto.terminate()
        moto.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
