"""The manifest of a sharded data set: which tar shards make it, how big, their checksums.

A data set pushed with `spotrun data push` is PREFIX/manifest.json plus PREFIX/<shard>.tar.
Each shard is a plain tar of regular files named `split/class/file` (an ImageFolder's own
paths), so extracting every shard into one folder rebuilds the ImageFolder (layout `tokens`:
`split/tokens-N.bin` token files of a pushed text, spotrun.train.data.token_files). The manifest is
written last: a prefix with shards and no manifest is an upload that did not finish.

Checksums: every shard has its sha256 (what names its content: markers compare it). Format 2
adds each shard's CRC-32 and `checksum = "crc32"`: the stager checks the bytes it receives
with CRC-32 (as S3's own end-to-end checks do), about a third of sha256's CPU per byte. It
guards against corrupt or cut-short transfers, with the size and file count; it is no defence
against someone who can write the bucket, but neither is sha256 here, since the manifest
that holds the sums sits beside the shards. Format 1 manifests (sha256 only) still stage.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from spotrun.core.config import describe_validation_error
from spotrun.core.errors import UnsafePathError, UsageError
from spotrun.core.safe_paths import plain_folder_name, plain_relpath

MANIFEST_NAME = "manifest.json"
FORMAT: Literal["spotrun-shards/2"] = "spotrun-shards/2"  # what a push writes
FORMATS = ("spotrun-shards/1", FORMAT)  # what staging reads
Checksum = Literal["sha256", "crc32"]
# What a file costs on disk beyond its bytes, at most: the rest of its last 4 KiB block.
BLOCK_BYTES = 4096
_SHARD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.tar")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CRC32 = re.compile(r"[0-9a-f]{8}")


def _folder_name(value: str, what: str) -> str:
    """A split becomes a folder of the staged set: a plain visible name (spotrun.core.safe_paths),
    so a shard can never write into the stager's own state folder and forge its markers."""
    try:
        return plain_folder_name(value, what=what)
    except UnsafePathError as exc:
        raise ValueError(exc.user_message()) from exc


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Shard(_Strict):
    name: str = Field(description="file name of the shard under the prefix, e.g. train-00000.tar")
    split: str = Field(description="train, val or test: every member is under this folder")
    size: int = Field(ge=0, description="bytes of the tar file")
    sha256: str = Field(description="of the tar file's bytes, lowercase hex")
    crc32: str | None = Field(
        default=None, description="CRC-32 (zlib's, S3's CRC32) of the tar file's bytes, 8 hex"
    )
    files: int = Field(ge=0, description="regular files in it")
    content_bytes: int = Field(ge=0, description="bytes of those files")

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not _SHARD_NAME.fullmatch(value):
            raise ValueError(f"'{value}' is not a plain shard file name (NAME.tar)")
        return value

    @field_validator("split")
    @classmethod
    def _plain_split(cls, value: str) -> str:
        return _folder_name(value, "split")

    @field_validator("sha256")
    @classmethod
    def _hex(cls, value: str) -> str:
        if not _SHA256.fullmatch(value):
            raise ValueError("sha256 must be 64 lowercase hex digits")
        return value

    @field_validator("crc32")
    @classmethod
    def _crc_hex(cls, value: str | None) -> str | None:
        if value is not None and not _CRC32.fullmatch(value):
            raise ValueError("crc32 must be 8 lowercase hex digits")
        return value

    def expected(self, checksum: Checksum) -> str:
        """The hex digest that `checksum` must give over this shard's bytes."""
        if checksum == "crc32":
            assert self.crc32 is not None  # the manifest's validator saw to it
            return self.crc32
        return self.sha256

    @property
    def disk_bytes(self) -> int:
        return self.content_bytes + self.files * BLOCK_BYTES


class StoredImages(_Strict):
    """How `data push --max-side` stored the training split: training-ready JPEGs whose longer
    side is at most `max_side`, re-encoded at `quality` (files already that small and JPEG kept
    as they were). The evaluation split is stored as it was. File names, classes and splits
    are the folder's own."""

    max_side: int = Field(ge=32, le=8192)
    quality: int = Field(ge=1, le=100)


class StoredTokens(_Strict):
    """How `data push TEXT --tokenizer NAME` stored a text: its splits as token files
    (spotrun.train.data.token_files), tokenised once at push time."""

    tokenizer: Literal["gpt2", "byte", "char"]
    dtype: Literal["uint16"] = "uint16"
    vocab_size: int = Field(ge=2, le=65536)
    val_fraction: float = Field(gt=0, lt=1, description="the last fraction of characters")


class Manifest(_Strict):
    format: Literal["spotrun-shards/1", "spotrun-shards/2"] = FORMAT
    checksum: Checksum = Field(
        default="crc32", description="what the stager checks each shard's bytes with"
    )
    layout: Literal["image-folder", "tokens"] = "image-folder"
    name: str = Field(description="the folder it was packed from")
    created_at: float
    classes: list[str] = Field(description="the training split's class folders, in label order")
    eval_split: str = Field(description="val or test")
    shards: list[Shard]
    images: StoredImages | None = Field(
        default=None, description="set when push stored the images training-ready"
    )
    tokens: StoredTokens | None = Field(
        default=None, description="set when push stored a text as token files"
    )

    @field_validator("eval_split")
    @classmethod
    def _plain_eval_split(cls, value: str) -> str:
        return _folder_name(value, "eval_split")

    @field_validator("classes")
    @classmethod
    def _plain_classes(cls, value: list[str]) -> list[str]:
        for name in value:
            try:
                plain_relpath(name, what="class")
            except UnsafePathError as exc:
                raise ValueError(exc.message) from exc
            if "/" in name or name.startswith("."):
                raise ValueError(f"class {name!r} is not one visible folder name")
        return value

    @field_validator("shards")
    @classmethod
    def _unique(cls, value: list[Shard]) -> list[Shard]:
        names = [s.name for s in value]
        if len(set(names)) != len(names):
            raise ValueError("shard names repeat")
        return value

    @model_validator(mode="after")
    def _checksums(self) -> Manifest:
        if self.format == "spotrun-shards/1" and self.checksum != "sha256":
            raise ValueError("a spotrun-shards/1 manifest checks shards with sha256 only")
        if (self.layout == "tokens") != (self.tokens is not None):
            raise ValueError("a tokens layout, and only that, says how its tokens are stored")
        if self.checksum == "crc32":
            missing = [s.name for s in self.shards if s.crc32 is None]
            if missing:
                raise ValueError(f"checksum is crc32 but shard {missing[0]} has no crc32")
        return self

    @property
    def size(self) -> int:
        return sum(s.size for s in self.shards)

    @property
    def files(self) -> int:
        return sum(s.files for s in self.shards)

    @property
    def disk_bytes(self) -> int:
        """Space the extracted data set takes at most (file bytes plus a block each)."""
        return sum(s.disk_bytes for s in self.shards)

    def split_files(self, split: str) -> int:
        return sum(s.files for s in self.shards if s.split == split)

    def to_json(self) -> str:
        # A set pushed as it was has no `images` key, so its digest is the one it always had.
        leave_out = {"images"} if self.images is None else set()
        leave_out |= {"tokens"} if self.tokens is None else set()
        data = self.model_dump(mode="json", exclude=leave_out)
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @property
    def digest(self) -> str:
        """Names this version of the data set: a re-push with other content has another."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]


def stored_images(max_side: int, quality: int) -> StoredImages:
    """The training-ready form a push was asked for; a UsageError for numbers out of range."""
    try:
        return StoredImages(max_side=max_side, quality=quality)
    except ValidationError as exc:
        raise UsageError(
            f"--max-side {max_side} --quality {quality}: {describe_validation_error(exc)}",
            hint="--max-side 32..8192 (resnet50-fast: 256), --quality 1..100 (default 90)",
        ) from exc


def read_manifest(text: str | bytes, where: str) -> Manifest:
    """The manifest in `text`; a UsageError naming `where` if it is not one."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{where} is not JSON ({exc})", hint="push the data set again") from exc
    if not isinstance(data, dict) or data.get("format") not in FORMATS:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise UsageError(
            f"{where} is not a spotrun shard manifest this version reads (format {found!r}, "
            f"expected one of {', '.join(FORMATS)})",
            hint="push the data set with `spotrun data push`, or upgrade spotrun",
        )
    if data["format"] == "spotrun-shards/1":
        data.setdefault("checksum", "sha256")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{where}: {describe_validation_error(exc)}") from exc
