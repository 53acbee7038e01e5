"""What a recipe's `data` value names: a local data set, an S3 prefix, or an EBS snapshot.

    digits | cifar10 | /path/to/set | set.tar.gz     here (spotrun.train.data.source)
    s3://bucket/prefix                              a sharded data set (manifest.json) or a
                                                    folder tree under the prefix
    snapshot:snap-0123456789abcdef0[/folder]        an EBS snapshot holding the data set,
                                                    optionally in a folder of its file system

Parsing is pure and strict, so a typo is refused at launch before anything exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from spotrun.core.errors import UsageError

S3_SCHEME = "s3://"
SNAPSHOT_SCHEME = "snapshot:"

# S3's bucket naming rules (general purpose buckets): 3-63 of a-z, 0-9, '.', '-'.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_SNAPSHOT = re.compile(r"snap-(?:[0-9a-f]{8}|[0-9a-f]{17})")

S3_FORM = "s3://BUCKET/PREFIX (a prefix holding manifest.json and shards, or an ImageFolder)"
SNAPSHOT_FORM = "snapshot:snap-0123456789abcdef0, or snapshot:snap-.../folder/in/it"


@dataclass(frozen=True)
class LocalData:
    """Data on this machine (or found by name in the data folder)."""

    text: str

    @property
    def uri(self) -> str:
        return self.text


@dataclass(frozen=True)
class S3Data:
    bucket: str
    prefix: str  # no leading or trailing '/'; "" is the bucket's root

    @property
    def uri(self) -> str:
        return f"{S3_SCHEME}{self.bucket}/{self.prefix}".rstrip("/")

    def key(self, name: str) -> str:
        """The S3 key of `name` inside the prefix."""
        return f"{self.prefix}/{name}" if self.prefix else name

    @property
    def list_prefix(self) -> str:
        """The prefix to list: the folder itself, never its namesakes (`set` vs `set-old`)."""
        return f"{self.prefix}/" if self.prefix else ""


@dataclass(frozen=True)
class SnapshotData:
    snapshot_id: str
    folder: str = ""  # inside the snapshot's file system; "" = its root

    @property
    def uri(self) -> str:
        return f"{SNAPSHOT_SCHEME}{self.snapshot_id}" + (f"/{self.folder}" if self.folder else "")


DataSpec = LocalData | S3Data | SnapshotData
RemoteData = S3Data | SnapshotData


def is_remote(text: str) -> bool:
    return text.strip().startswith((S3_SCHEME, SNAPSHOT_SCHEME))


def parse_data(text: str) -> DataSpec:
    """The data set `text` names; a UsageError for a malformed s3:// or snapshot: value."""
    text = text.strip()
    if text.startswith(S3_SCHEME):
        return parse_s3(text)
    if text.startswith(SNAPSHOT_SCHEME):
        return parse_snapshot(text)
    return LocalData(text)


def parse_s3(text: str) -> S3Data:
    rest = text[len(S3_SCHEME) :]
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise UsageError(
            f"data '{text}': '{bucket}' is not an S3 bucket name",
            hint=f"expected {S3_FORM}; bucket names are 3-63 of a-z, 0-9, '.' and '-'",
        )
    prefix = prefix.strip("/")
    parts = PurePosixPath(prefix).parts if prefix else ()
    if "//" in prefix or any(p in (".", "..") for p in parts):
        raise UsageError(f"data '{text}': the prefix must be a plain folder path", hint=S3_FORM)
    return S3Data(bucket, prefix)


def parse_snapshot(text: str) -> SnapshotData:
    rest = text[len(SNAPSHOT_SCHEME) :]
    snapshot_id, _, folder = rest.partition("/")
    if not _SNAPSHOT.fullmatch(snapshot_id):
        raise UsageError(
            f"data '{text}': '{snapshot_id}' is not an EBS snapshot id", hint=SNAPSHOT_FORM
        )
    folder = folder.strip("/")
    if folder and any(p in (".", "..") for p in PurePosixPath(folder).parts):
        raise UsageError(f"data '{text}': the folder must be a plain path", hint=SNAPSHOT_FORM)
    return SnapshotData(snapshot_id, folder)
