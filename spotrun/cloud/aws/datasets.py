"""S3 as spotrun's object store for data sets (spotrun.datasets.objects.ObjectStore).

One boto3 client with a connection pool as wide as the stager's parallel streams; every S3
error a user can act on (no such bucket, not readable) becomes a UsageError naming the bucket.
Transfers that break mid-way become TransferError, which the stager retries. `data_site` says
where a data set lives (its bucket's region) and how big it is, for the launch's plan.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from urllib3.exceptions import HTTPError as Urllib3Error

from spotrun.cloud.aws.errors import aws_call, error_code
from spotrun.cloud.ranking import DataSite
from spotrun.core.errors import UsageError
from spotrun.datasets.manifest import MANIFEST_NAME, read_manifest
from spotrun.datasets.objects import ObjectInfo, TransferError
from spotrun.datasets.spec import parse_s3

CHUNK_BYTES = 1 << 20
SHA256_METADATA = "sha256"  # x-amz-meta-sha256
_MISSING = frozenset({"404", "NoSuchKey", "NotFound"})
_NO_BUCKET = frozenset({"NoSuchBucket"})
_DENIED = frozenset({"403", "AccessDenied", "Forbidden", "AllAccessDisabled"})


def default_region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


class S3Store:
    def __init__(self, bucket: str, *, region: str | None = None, connections: int = 64) -> None:
        self.bucket = bucket
        self.region = region or default_region()
        config = Config(
            region_name=self.region,
            retries={"mode": "standard", "total_max_attempts": 5},
            max_pool_connections=connections,
            connect_timeout=10,
            read_timeout=60,
            user_agent_extra="spotrun",
        )
        self.client: Any = boto3.session.Session().client("s3", config=config)
        self._transfer = TransferConfig(
            multipart_threshold=64 << 20,
            multipart_chunksize=32 << 20,
            max_concurrency=8,
            use_threads=True,
        )

    @property
    def where(self) -> str:
        return f"s3://{self.bucket}"

    # ------------------------------------------------------------ errors
    def _refuse(self, exc: ClientError, key: str, operation: str) -> None:
        """Raise the UsageError for a bucket that is missing or not readable."""
        code = error_code(exc)
        if code in _NO_BUCKET:
            raise UsageError(
                f"S3 bucket '{self.bucket}' does not exist",
                hint=f"check the bucket name in the s3:// address (and the region, {self.region})",
            ) from exc
        if code in _DENIED:
            raise UsageError(
                f"s3://{self.bucket}/{key} is not readable with these credentials "
                f"({operation}: {code})",
                hint=f"grant s3:ListBucket and s3:GetObject on {self.bucket} to the user or the "
                "instance profile",
            ) from exc

    def check_bucket(self) -> str:
        """Refuse a bucket that is missing or not readable; the region it lives in.

        HeadBucket names the bucket's region (x-amz-bucket-region) and needs only s3:ListBucket,
        which reading a data set needs anyway (GetBucketLocation would need a permission more).
        """
        try:
            answer = self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if error_code(exc) in _MISSING | _NO_BUCKET:
                raise UsageError(
                    f"S3 bucket '{self.bucket}' does not exist",
                    hint="create it first (aws s3 mb s3://BUCKET), or check its name",
                ) from exc
            self._refuse(exc, "", "HeadBucket")
            with aws_call("s3", "HeadBucket", self.region):
                raise
        except BotoCoreError as exc:
            with aws_call("s3", "HeadBucket", self.region):
                raise exc
        headers = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        return str(answer.get("BucketRegion") or headers.get("x-amz-bucket-region") or self.region)

    # ------------------------------------------------------------- reads
    def read(self, key: str) -> bytes | None:
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=key)
            return bytes(answer["Body"].read())
        except ClientError as exc:
            if error_code(exc) in _MISSING:
                return None
            self._refuse(exc, key, "GetObject")
            with aws_call("s3", "GetObject", self.region):
                raise
        except BotoCoreError as exc:
            with aws_call("s3", "GetObject", self.region):
                raise exc

    def head(self, key: str) -> ObjectInfo | None:
        try:
            answer = self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if error_code(exc) in _MISSING:
                return None
            self._refuse(exc, key, "HeadObject")
            with aws_call("s3", "HeadObject", self.region):
                raise
        meta = answer.get("Metadata") or {}
        return ObjectInfo(
            key,
            int(answer["ContentLength"]),
            str(answer.get("ETag", "")).strip('"'),
            meta.get(SHA256_METADATA),
        )

    def stream(self, key: str, start: int, end: int) -> tuple[int, Iterator[bytes]]:
        if end <= start:  # an empty object or range: nothing to fetch, but the size is asked
            info = self.head(key)
            if info is None:
                raise TransferError(f"{self.where}/{key} is gone")
            return info.size, iter(())
        try:
            answer = self.client.get_object(
                Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end - 1}"
            )
        except ClientError as exc:
            self._refuse(exc, key, "GetObject")
            if error_code(exc) in _MISSING:
                raise UsageError(
                    f"{self.where}/{key} is listed in the manifest but is not in S3",
                    hint="the upload did not finish; push the data set again",
                ) from exc
            if error_code(exc) == "InvalidRange":
                raise TransferError(f"{self.where}/{key} is shorter than {end:,} bytes") from exc
            raise TransferError(f"GET {key}: {error_code(exc)}") from exc
        except BotoCoreError as exc:
            raise TransferError(f"GET {key}: {exc}") from exc
        size = _total_size(answer, end)
        return size, _chunks(answer["Body"], key)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        )
        try:
            for page in pages:
                for obj in page.get("Contents", []):
                    yield ObjectInfo(obj["Key"], int(obj["Size"]), str(obj["ETag"]).strip('"'))
        except ClientError as exc:
            self._refuse(exc, prefix, "ListObjectsV2")
            with aws_call("s3", "ListObjectsV2", self.region):
                raise
        except BotoCoreError as exc:
            with aws_call("s3", "ListObjectsV2", self.region):
                raise exc

    # ------------------------------------------------------------ writes
    def upload(self, path: Path, key: str, sha256: str) -> None:
        with aws_call("s3", "PutObject", self.region):
            try:
                self.client.upload_file(
                    str(path),
                    self.bucket,
                    key,
                    ExtraArgs={"Metadata": {SHA256_METADATA: sha256}},
                    Config=self._transfer,
                )
            except ClientError as exc:
                self._refuse(exc, key, "PutObject")
                raise

    def put(self, key: str, data: bytes) -> None:
        with aws_call("s3", "PutObject", self.region):
            try:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
            except ClientError as exc:
                self._refuse(exc, key, "PutObject")
                raise


def data_site(uri: str) -> DataSite:
    """Where the S3 data set at `uri` lives (its bucket's region) and its size from its
    manifest (None for a folder tree pushed without one)."""
    source = parse_s3(uri)
    store = S3Store(source.bucket)
    region = store.check_bucket()
    raw = store.read(source.key(MANIFEST_NAME))
    size = None
    if raw is not None:
        size = read_manifest(raw, f"{source.uri}/{MANIFEST_NAME}").size
    return DataSite(source.uri, region, size)


def _total_size(answer: dict[str, Any], fallback: int) -> int:
    """The whole object's size from a ranged answer's Content-Range ('bytes 0-9/1234')."""
    content_range = str(answer.get("ContentRange", ""))
    total = content_range.rpartition("/")[2]
    return int(total) if total.isdigit() else fallback


def _chunks(body: Any, key: str) -> Iterator[bytes]:
    try:
        yield from body.iter_chunks(CHUNK_BYTES)
    except (BotoCoreError, Urllib3Error, OSError) as exc:  # a connection that broke mid-body
        raise TransferError(f"GET {key} broke off: {exc}") from exc
    finally:
        body.close()
