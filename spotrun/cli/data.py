"""`spotrun data push|ls`: data sets in S3, pushed as tar shards and a manifest."""

from __future__ import annotations

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
    help="Data sets in S3: push a folder as tar shards, list what was pushed.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


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
