"""What staging and pushing need from an object store, so they do not depend on a provider.

spotrun.cloud.aws.datasets.S3Store implements it over boto3; nothing here imports a cloud SDK.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str = ""  # S3's ETag without quotes: an MD5 of the bytes unless it has a '-'
    sha256: str | None = None  # from the object's metadata, where spotrun wrote one


class TransferError(Exception):
    """Bytes that arrived wrong or not at all (a checksum that failed in transit, a connection
    that broke): fetching again may succeed."""


class ObjectStore(Protocol):
    @property
    def where(self) -> str:
        """The store's name in messages, e.g. s3://bucket."""
        ...

    def read(self, key: str) -> bytes | None:
        """A small object's bytes; None if it does not exist."""
        ...

    def head(self, key: str) -> ObjectInfo | None: ...

    def stream(self, key: str, start: int, end: int) -> tuple[int, Iterator[bytes]]:
        """(the object's full size, its bytes [start, end) in chunks as they arrive).

        Raises TransferError for a fetch that may succeed if repeated."""
        ...

    def list(self, prefix: str) -> Iterator[ObjectInfo]: ...

    def upload(self, path: Path, key: str, sha256: str) -> None:
        """Upload a file (multipart and in parallel parts when large), sha256 as metadata."""
        ...

    def put(self, key: str, data: bytes) -> None: ...
