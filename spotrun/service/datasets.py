"""What `spotrun data push|ls` ask of S3 (a launch's check of its S3 data: spotrun.service.prepare),
and `spotrun data get`: a known public data set into the data folder.

`data push` and `data ls` are re-exported by spotrun.service.runs (the library surface).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotrun.cloud.by_name import data_bucket, s3_store
from spotrun.core.config import Settings
from spotrun.core.errors import NotFoundError, UsageError
from spotrun.core.lazy import lazy_module
from spotrun.datasets.download import Fetched, ProgressReport, fetch_known
from spotrun.datasets.known import KNOWN_DATA_SETS, KnownDataSet, find_known, unknown_name_hint
from spotrun.datasets.manifest import MANIFEST_NAME, StoredImages, read_manifest, stored_images
from spotrun.datasets.push import PushResult, parse_size, push
from spotrun.datasets.spec import S3_FORM, S3Data, parse_s3

if TYPE_CHECKING:
    from spotrun.datasets import token_push
    from spotrun.datasets.token_push import PushTokenizer
else:
    token_push = lazy_module("spotrun.datasets.token_push")  # numpy, the tokenizer: a text push


def _s3(text: str) -> S3Data:
    if not text.startswith("s3://"):
        raise UsageError(f"'{text}' is not an s3:// address", hint=f"expected {S3_FORM}")
    return parse_s3(text)


def push_folder(
    folder: Path,
    dest: str,
    *,
    shard_size: int,
    parallel: int,
    log: Callable[[str], None],
    images: StoredImages | None = None,
    keep_original: bool = False,
) -> PushResult:
    target = _s3(dest)
    if not target.prefix:
        raise UsageError(
            f"{dest} names a whole bucket", hint="push into a prefix: s3://BUCKET/NAME"
        )
    store = s3_store(target.bucket, connections=max(10, parallel * 2))
    store.check_bucket()
    return push(
        store,
        folder,
        target,
        shard_size=shard_size,
        parallel=parallel,
        log=log,
        images=images,
        keep_original=keep_original,
    )


def push_text_file(
    text_file: Path,
    dest: str,
    *,
    tokenizer: str,
    val_fraction: float,
    shard_size: int,
    parallel: int,
    log: Callable[[str], None],
) -> PushResult:
    """A UTF-8 text tokenised here and pushed as token files (spotrun.datasets.token_push)."""
    kinds: dict[str, PushTokenizer] = {"gpt2": "gpt2", "byte": "byte", "char": "char"}
    kind = kinds.get(tokenizer)
    if kind is None:
        raise UsageError(
            f"--tokenizer {tokenizer}: a pushed text is stored as gpt2, byte or char tokens",
            hint="--tokenizer gpt2 (gpt2-small-*), char (shakespeare-*) or byte",
        )
    target = _s3(dest)
    if not target.prefix:
        raise UsageError(
            f"{dest} names a whole bucket", hint="push into a prefix: s3://BUCKET/NAME"
        )
    store = s3_store(target.bucket, connections=max(10, parallel * 2))
    store.check_bucket()
    return token_push.push_text(
        store,
        text_file,
        target,
        tokenizer=kind,
        val_fraction=val_fraction,
        shard_size=shard_size,
        parallel=parallel,
        log=log,
    )


@dataclass(frozen=True)
class DataSetRow:
    uri: str
    name: str
    shards: int
    files: int
    size: int
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "name": self.name,
            "shards": self.shards,
            "files": self.files,
            "bytes": self.size,
            "created_at": self.created_at,
        }


def list_sets(where: str) -> list[DataSetRow]:
    """The pushed data sets at or under `where` (s3://bucket[/prefix])."""
    target = _s3(where)
    store = s3_store(target.bucket)
    store.check_bucket()
    rows = []
    for info in store.list(target.list_prefix):
        if info.key != MANIFEST_NAME and not info.key.endswith("/" + MANIFEST_NAME):
            continue
        raw = store.read(info.key)
        if raw is None:
            continue
        prefix = info.key[: -len(MANIFEST_NAME)].rstrip("/")
        uri = f"s3://{target.bucket}/{prefix}".rstrip("/")
        manifest = read_manifest(raw, f"{uri}/{MANIFEST_NAME}")
        rows.append(
            DataSetRow(
                uri,
                manifest.name,
                len(manifest.shards),
                manifest.files,
                manifest.size,
                manifest.created_at,
            )
        )
    return rows


def data_push(
    folder: Path,
    dest: str,
    *,
    shard_size: str = "256MB",
    parallel: int = 8,
    log: Any = print,
    max_side: int | None = None,
    quality: int = 90,
    keep_original: bool = False,
    tokenizer: str = "gpt2",
    val_fraction: float = 0.1,
) -> Any:
    """Pack an ImageFolder into tar shards plus a manifest under an s3:// prefix (its images
    training-ready, longer side at most `max_side`, when that is given); a text file is
    tokenised (`tokenizer`) and pushed as token files."""
    size = parse_size(shard_size)
    if parallel < 1:
        raise UsageError(f"--parallel must be at least 1, got {parallel}")
    if folder.is_file():
        if max_side is not None or keep_original:
            raise UsageError(
                f"{folder} is a text file: --max-side and --keep-original are for images",
                hint="leave them out for a text",
            )
        return push_text_file(
            folder,
            dest,
            tokenizer=tokenizer,
            val_fraction=val_fraction,
            shard_size=size,
            parallel=parallel,
            log=log,
        )
    images = stored_images(max_side, quality) if max_side is not None else None
    return push_folder(
        folder,
        dest,
        shard_size=size,
        parallel=parallel,
        log=log,
        images=images,
        keep_original=keep_original,
    )


def data_list(where: str | None, settings: Settings) -> list[dict[str, Any]]:
    """The data sets pushed at or under `where` (default: the configured aws.bucket)."""
    if where is None:
        bucket = data_bucket(settings)
        if not bucket:
            raise UsageError(
                "which bucket? give s3://BUCKET[/PREFIX]", hint="or set aws.bucket in config.toml"
            )
        where = f"s3://{bucket}"
    return [row.to_dict() for row in list_sets(where)]


def known_data_sets() -> tuple[KnownDataSet, ...]:
    return KNOWN_DATA_SETS


def data_get(name: str, settings: Settings, progress: ProgressReport) -> Fetched:
    """The known data set `name` in the data folder (settings.data_path), fetched from its
    home or from settings.data_mirror, its sha256 checked before it is put in place."""
    entry = find_known(name)
    if entry is None:
        raise NotFoundError(f"no known data set '{name}'", hint=unknown_name_hint(name))
    return fetch_known(entry, settings.data_path, mirror=settings.data_mirror, progress=progress)
