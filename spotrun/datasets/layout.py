"""Where a staged data set lives on a machine, and the markers that make staging resumable.

    ROOT/BUCKET/PREFIX/                  the data set itself (an ImageFolder: train/, val/)
    ROOT/BUCKET/PREFIX/.spotrun-stage/   spotrun's state (hidden: loaders skip dot folders)
        manifest.json                    the manifest this copy follows
        done/<shard>.json                one marker per shard in place and verified
        objects.done                     folder trees: one line per object in place
        complete.json                    all of it is in place

A marker is written only after its shard's bytes matched the manifest's size and sha256 and
every file was written, so a stage that is killed, or a replacement instance that finds a
cache volume, redoes only what has no marker.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from spotrun.core.errors import UsageError
from spotrun.core.rundir import STAGE_ROOT_VAR
from spotrun.datasets.manifest import StoredImages, read_manifest
from spotrun.datasets.spec import S3Data

STATE_DIR = ".spotrun-stage"


def _write_json(path: Path, value: object) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(value, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class StageLayout:
    def __init__(self, root: Path, source: S3Data) -> None:
        self.root = root
        self.source = source
        self.dest = root / source.bucket / (source.prefix or "_bucket_root")
        self.state = self.dest / STATE_DIR
        self.manifest_path = self.state / "manifest.json"
        self.done_dir = self.state / "done"
        self.objects_journal = self.state / "objects.done"
        self.complete_path = self.state / "complete.json"

    # ---------------------------------------------------------- whole set
    def complete(self) -> dict[str, Any] | None:
        """What the completion marker says, if this copy is complete."""
        done = _read_json(self.complete_path)
        if done is None or done.get("source") != self.source.uri:
            return None
        return done

    def mark_complete(self, record: dict[str, Any]) -> None:
        _write_json(self.complete_path, {"source": self.source.uri, **record})

    def version(self) -> str | None:
        """The data set version this folder was last prepared for (see `prepare`)."""
        recorded = _read_json(self.state / "version.json")
        return None if recorded is None else str(recorded.get("version"))

    def prepare(self, version: str) -> None:
        """Make the folder ready for data set `version` (a manifest digest or listing digest):
        an unfinished copy of the same version is kept (resumed); any other copy spotrun made
        is cleared; a folder spotrun did not make is never touched."""
        if self.dest.exists() and not self.state.is_dir() and any(self.dest.iterdir()):
            raise UsageError(
                f"{self.dest} already holds files that spotrun did not stage",
                hint=f"move them away, or stage into another folder ({STAGE_ROOT_VAR})",
            )
        recorded = _read_json(self.state / "version.json")
        if self.state.is_dir() and (recorded or {}).get("version") != version:
            shutil.rmtree(self.dest)
        self.done_dir.mkdir(parents=True, exist_ok=True)
        _write_json(self.state / "version.json", {"version": version, "source": self.source.uri})

    # --------------------------------------------------------------- shards
    def shard_marker(self, name: str) -> dict[str, Any] | None:
        return _read_json(self.done_dir / f"{name}.json")

    def mark_shard(self, name: str, record: dict[str, Any]) -> None:
        _write_json(self.done_dir / f"{name}.json", record)

    # -------------------------------------------------------------- objects
    def objects_done(self) -> dict[str, tuple[int, str]]:
        """Folder trees: key -> (size, etag) of every object already in place."""
        found: dict[str, tuple[int, str]] = {}
        try:
            text = self.objects_journal.read_text()
        except FileNotFoundError:
            return found
        for line in text.splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[1].isdigit():
                found[parts[0]] = (int(parts[1]), parts[2])
        return found


def staged_images(dataset: Path) -> StoredImages | None:
    """How the staged set at `dataset` (the folder holding train/) stores its images: the
    training-ready form its manifest names, or None (pushed as it was, or not a staged set)."""
    path = dataset / STATE_DIR / "manifest.json"
    if not path.exists():
        return None
    return read_manifest(path.read_text(), str(path)).images
