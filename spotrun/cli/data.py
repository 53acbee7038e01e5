"""`spotrun data get|push|ls`: known public data sets into the data folder; data sets in S3,
pushed as tar shards and a manifest."""

from __future__ import annotations

import sys
import time
from enum import Enum
from pathlib import Path

import typer

from spotrun.cli.library import datasets, load_settings
from spotrun.cli.render import Table, iso_minute, out, print_json
from spotrun.cli.typer_app import SpotrunTyper


class Tokenizer(str, Enum):
    """How `data push` stores a text file's tokens (help lists the choices)."""

    gpt2 = "gpt2"  # GPT-2 BPE: gpt2-small-*
    char = "char"  # shakespeare-*
    byte = "byte"


data_app = SpotrunTyper(
    help="Data sets: get a known public one into the data folder; push a folder to S3 as tar "
    "shards, list what was pushed.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


PROGRESS_WIDTH = 30  # characters of the bar
PIPED_PROGRESS_S = 10.0  # piped, a progress line this often


@data_app.command("get")
def data_get(
    name: str | None = typer.Argument(
        None, help="a known data set (tinyshakespeare); none: list them"
    ),
) -> None:
    """Fetch a known public data set into the data folder, checked against its sha256.

    The recipes then find it by name. An interrupted fetch goes on where it stopped when run
    again; a file whose hash is wrong is not kept. Setting `data_mirror` in config.toml
    fetches from a mirror of your own (the same file names under one URL).

    \b
    Examples:
      spotrun data get                   # what it knows: name, size, source, recipes
      spotrun data get tinyshakespeare   # for shakespeare-fast and shakespeare-baseline
    """
    if name is None:
        table = Table(box=None)
        for column in ("name", "file", "size", "source", "for"):
            table.add_column(column)
        for entry in datasets.known_data_sets():
            table.add_row(
                entry.name, entry.file_name, f"{entry.size / 1e6:.1f} MB", entry.url, entry.about
            )
        out.print(table)
        return
    settings = load_settings()
    bar = ProgressBar(name)
    fetched = datasets.data_get(name, settings, bar.report)
    bar.finish()
    if fetched.url is None:
        out.print(f"{name} is already in the data folder: {fetched.path} (sha256 checked)")
        return
    resumed = f", resumed at byte {fetched.resumed_at:,}" if fetched.resumed_at else ""
    out.print(f"{name}: {fetched.path} (sha256 checked{resumed}) from {fetched.url}")


class ProgressBar:
    """A fetch's progress on stderr: one line redrawn on a terminal, a line now and then piped."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.live = sys.stderr.isatty()
        self.last_line_at = 0.0
        self.drawn = False

    def report(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.live and now - self.last_line_at < PIPED_PROGRESS_S and done < total:
            return
        self.last_line_at = now
        filled = PROGRESS_WIDTH * min(done, total) // max(total, 1)
        line = (
            f"{self.label} [{'#' * filled}{'.' * (PROGRESS_WIDTH - filled)}] "
            f"{done / 1e6:.1f} / {total / 1e6:.1f} MB"
        )
        sys.stderr.write(("\r" + line) if self.live else (line + "\n"))
        sys.stderr.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.live and self.drawn:
            sys.stderr.write("\n")


@data_app.command("push")
def data_push(
    folder: Path = typer.Argument(
        ..., help="an ImageFolder (train/ and val/ or test/), or a UTF-8 text file"
    ),
    dest: str = typer.Argument(..., help="s3://BUCKET/PREFIX"),
    shard_size: str = typer.Option("256MB", "--shard-size", help="bytes per tar shard"),
    parallel: int = typer.Option(8, "--parallel", help="shards packed and uploaded at once"),
    max_side: int | None = typer.Option(
        None,
        "--max-side",
        help="store the images training-ready: longer side at most N px, JPEG (resnet50-fast: 256)",
    ),
    quality: int = typer.Option(90, "--quality", help="JPEG quality of the resized images"),
    keep_original: bool = typer.Option(
        False, "--keep-original", help="with --max-side: the originals too, under PREFIX/original"
    ),
    tokenizer: Tokenizer = typer.Option(
        Tokenizer.gpt2,
        "--tokenizer",
        help="a text file: tokenised here as gpt2 (GPT-2 BPE), char (shakespeare-*) or byte",
    ),
    val_fraction: float = typer.Option(
        0.1, "--val-fraction", help="a text file: the last fraction of characters held out"
    ),
) -> None:
    """Pack FOLDER into tar shards and a manifest, and upload them in parallel.

    A text file is tokenised once, here, and pushed as token files (uint16 ids) for the
    language-model recipes (gpt2-small-* with gpt2, shakespeare-* with char): the instance
    then trains without tokenising.

    \b
    Examples:
      spotrun data push ./imagenet s3://my-bucket/imagenet --max-side 256
      spotrun data push ./cifar10 s3://my-bucket/cifar10 --shard-size 64MB
      spotrun data push ./openwebtext.txt s3://my-bucket/owt --tokenizer gpt2 --val-fraction 0.005
      spotrun data push ./tinyshakespeare.txt s3://my-bucket/shakespeare --tokenizer char
    """
    result = datasets.data_push(
        folder,
        dest,
        shard_size=shard_size,
        parallel=parallel,
        log=lambda line: out.print(line),
        max_side=max_side,
        quality=quality,
        keep_original=keep_original,
        tokenizer=tokenizer.value,
        val_fraction=val_fraction,
    )
    out.print(f"use it with: --set data={dest.rstrip('/')}  ({result.manifest.digest})")


@data_app.command("ls")
def data_ls(
    where: str | None = typer.Argument(None, help="s3://BUCKET[/PREFIX]; default aws.bucket"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List the data sets pushed at or under an S3 prefix.

    \b
    Examples:
      spotrun data ls
      spotrun data ls s3://my-bucket/
    """
    rows = datasets.data_list(where, load_settings())
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no data sets there (push one: spotrun data push FOLDER s3://BUCKET/NAME)")
        return
    table = Table(box=None)
    for column in ("data set", "name", "shards", "files", "size", "pushed"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["uri"],
            row["name"],
            str(row["shards"]),
            f"{row['files']:,}",
            f"{row['bytes'] / 1e9:.2f} GB",
            iso_minute(row["created_at"]),
        )
    out.print(table)
