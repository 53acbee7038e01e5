"""Stage a data set from an object store onto this machine's disk, fast, checked, resumable.

A sharded set (PREFIX/manifest.json) is fetched shard by shard, many at once, each shard
streamed through its checksum (CRC-32; sha256 for a format 1 manifest) and extracted into
place as it arrives (no second copy); a shard whose bytes do not match the manifest is
fetched once more, then staging fails naming it. A folder tree without a manifest is fetched
object by object into place, sizes (and MD5s where the ETag is one) checked. Markers
(spotrun.datasets.layout) make a repeated stage skip what is already in place; free disk
space is checked before the first byte moves.

Concurrency: `streams` GETs in flight, over at most two shards per CPU core at once (each
shard is CPU work: more threads than that only fight over the interpreter lock). Each of those
shards gets its share of the streams as ranges fetched in parallel and read back in order
(spotrun.datasets.parts), ranges of at least `min_part_bytes`.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Literal, TextIO

from spotrun.core.errors import DataError, UsageError
from spotrun.core.rundir import STAGE_ROOT_VAR
from spotrun.core.safe_paths import part_path, plain_relpath, safe_join
from spotrun.datasets.extract import (
    Algorithm,
    DirCache,
    Extracted,
    HashingReader,
    ShardContentError,
    extract_shard,
    remove_files,
)
from spotrun.datasets.layout import STATE_DIR, StageLayout
from spotrun.datasets.manifest import (
    BLOCK_BYTES,
    MANIFEST_NAME,
    Manifest,
    Shard,
    read_manifest,
)
from spotrun.datasets.objects import ObjectInfo, ObjectStore, TransferError
from spotrun.datasets.parts import OrderedParts, split_ranges
from spotrun.datasets.progress import StagingStatus, Tracker, fmt_bytes
from spotrun.datasets.spec import S3Data
from spotrun.train.data.source import EVAL_SPLITS, TRAIN_SPLIT

_MD5 = re.compile(r"[0-9a-f]{32}")
COPY_BYTES = 1 << 20


@dataclass(frozen=True)
class StageOptions:
    streams: int = 32  # GETs in flight at most
    # Shards extracted at once (None: two per CPU core). Each is CPU work (checksum, tar
    # headers, file writes); more threads than that only trade the interpreter lock: with 9
    # shards at once on 2 cores the stager spent ~2.1 CPU-s per GB, with 4 ~1.3. The streams
    # are shared among them as ranged GETs.
    shard_workers: int | None = None
    min_part_bytes: int = 16 << 20  # a ranged GET moves at least this much
    reserve_bytes: int = 1 << 30  # free space left on the disk after staging
    log_every_s: float = 10.0
    status_path: Path | None = None  # staging.json


@dataclass(frozen=True)
class StageResult:
    dest: Path
    status: StagingStatus


class _Cancelled(Exception):
    """Another item failed: this one stops without counting as a failure of its own."""


@contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """One stager per destination on a machine (torchrun ranks, the agent and a trainer)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def check_space(dest: Path, need: int, reserve: int, what: str) -> None:
    """A DataError before anything is fetched if `need` bytes will not fit under `dest`."""
    probe = dest
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if need + reserve > free:
        raise DataError(
            f"not enough disk to stage {what}: it needs {fmt_bytes(need)} (plus "
            f"{fmt_bytes(reserve)} kept free), and {probe} has {fmt_bytes(free)} free",
            hint="choose an instance type with more local NVMe storage, a bigger root volume "
            f"(--disk-gb), or another folder ({STAGE_ROOT_VAR})",
        )


def stage(
    store: ObjectStore,
    source: S3Data,
    root: Path,
    options: StageOptions = StageOptions(),
    log: Callable[[str], None] = print,
    splits: frozenset[str] | None = None,
) -> StageResult:
    """Put the data set at `source` in place under `root`; returns where it is. With `splits`
    (a sharded set only), just those splits' shards: the set is not marked complete."""
    layout = StageLayout(root, source)
    with exclusive(layout.dest.with_name(layout.dest.name + ".lock")):
        done = layout.complete()
        if done is not None:
            status = StagingStatus(source.uri, str(layout.dest), state="done")
            status.total_bytes = status.done_bytes = status.skipped_bytes = int(done["bytes"])
            status.items_total = status.items_skipped = int(done["items"])
            status.kind = done.get("kind", "shards")
            tracker = Tracker(status, options.status_path, log)
            tracker.finish("done")
            return StageResult(layout.dest, status)
        raw = store.read(source.key(MANIFEST_NAME))
        if raw is not None:
            manifest = read_manifest(raw, f"{source.uri}/{MANIFEST_NAME}")
            return _ShardStager(store, source, layout, manifest, options, log, splits).run()
        if splits is not None:
            raise UsageError(
                f"{source.uri} has no manifest.json: training cannot start on its first shards",
                hint="push it as shards (spotrun data push), or drop stream_data",
            )
        return _FileStager(store, source, layout, options, log).run()


class _Stager:
    """What both kinds share: the worker pool, fail-fast cancelling, the progress tracker."""

    kind: Literal["shards", "files"] = "shards"

    def __init__(
        self,
        store: ObjectStore,
        source: S3Data,
        layout: StageLayout,
        options: StageOptions,
        log: Callable[[str], None],
    ) -> None:
        self.store = store
        self.source = source
        self.layout = layout
        self.options = options
        self.log = log
        self.cancelled = threading.Event()
        self.dirs = DirCache()
        self.status = StagingStatus(source.uri, str(layout.dest), kind=self.kind)
        self.tracker = Tracker(
            self.status, options.status_path, log, log_every_s=options.log_every_s
        )
        self._lock = threading.Lock()
        self._started = 0  # items started so far
        self._todo = 0
        self._workers = options.streams  # items at once (run_all sets it)

    def window_for(self, size: int) -> int:
        """How many ranged GETs one item gets: all streams shared by the items still to go."""
        with self._lock:
            self._started += 1
            left = max(1, min(self._workers, self._todo - self._started + 1))
        return max(1, self.options.streams // left) if size > self.options.min_part_bytes else 1

    def fetch(
        self, key: str, size: int, on_bytes: Callable[[int], None], algorithm: Algorithm | None
    ) -> tuple[OrderedParts, HashingReader]:
        window = self.window_for(size)
        ranges = split_ranges(size, window, self.options.min_part_bytes)
        parts = OrderedParts(partial(self.store.stream, key), ranges, window, self.cancelled)
        return parts, HashingReader(parts, on_bytes=on_bytes, algorithm=algorithm)

    def run_all(
        self, items: list[object], work: Callable[[object], None], at_once: int | None = None
    ) -> None:
        """`work` on every item, `at_once` (default: streams) at a time, failing fast."""
        self._todo = len(items)
        self._workers = max(1, min(at_once or self.options.streams, self.options.streams))
        self.tracker.start()
        pool = ThreadPoolExecutor(
            max_workers=max(1, min(self._workers, len(items))), thread_name_prefix="stage"
        )
        try:
            futures: list[Future[None]] = [pool.submit(work, item) for item in items]
            finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in finished if f.exception() is not None]
            if failed:
                self.cancelled.set()
                pool.shutdown(wait=True, cancel_futures=True)
                error = failed[0].exception()
                assert error is not None
                raise error
        except BaseException as exc:
            self.cancelled.set()
            pool.shutdown(wait=True, cancel_futures=True)
            message = exc.user_message() if isinstance(exc, (DataError, UsageError)) else str(exc)
            self.tracker.finish("failed", message or type(exc).__name__)
            raise
        pool.shutdown(wait=True)

    def finish(self, record: dict[str, object]) -> StageResult:
        self.layout.mark_complete(
            {"bytes": self.status.total_bytes, "items": self.status.items_total, **record}
        )
        self.tracker.finish("done")
        return StageResult(self.layout.dest, self.status)

    def counter(self) -> tuple[list[int], Callable[[int], None]]:
        """A byte counter for one attempt, feeding the tracker as bytes arrive."""
        counted = [0]

        def add(n: int) -> None:
            counted[0] += n
            self.tracker.add(n)

        return counted, add


class _ShardStager(_Stager):
    kind: Literal["shards", "files"] = "shards"

    def __init__(
        self,
        store: ObjectStore,
        source: S3Data,
        layout: StageLayout,
        manifest: Manifest,
        options: StageOptions,
        log: Callable[[str], None],
        splits: frozenset[str] | None = None,
    ) -> None:
        super().__init__(store, source, layout, options, log)
        self.manifest = manifest
        self.splits = splits

    def _in_place(self, shard: Shard) -> bool:
        marker = self.layout.shard_marker(shard.name)
        return marker is not None and marker.get("sha256") == shard.sha256

    def run(self) -> StageResult:
        m = self.manifest
        self.layout.prepare(m.digest)
        self.layout.manifest_path.write_text(m.to_json())
        wanted = [s for s in m.shards if self.splits is None or s.split in self.splits]
        todo = [s for s in wanted if not self._in_place(s)]
        skipped = [s for s in wanted if s not in todo]
        st = self.status
        st.total_bytes, st.items_total = sum(s.size for s in wanted), len(wanted)
        st.items_skipped = st.items_done = len(skipped)
        st.skipped_bytes = st.done_bytes = sum(s.size for s in skipped)
        check_space(
            self.layout.dest,
            sum(s.disk_bytes for s in todo),
            self.options.reserve_bytes,
            self.source.uri,
        )
        which = f" ({', '.join(sorted(self.splits))} first)" if self.splits else ""
        self.log(
            f"staging {self.source.uri}{which}: {len(wanted)} shards, {fmt_bytes(st.total_bytes)}, "
            f"{sum(s.files for s in wanted):,} files into {self.layout.dest}"
            + (f" ({len(skipped)} shards already in place)" if skipped else "")
        )
        workers = self.options.shard_workers or 2 * (os.cpu_count() or 1)
        self.run_all(list(todo), self._stage_shard, workers)  # type: ignore[arg-type]
        if self.splits is not None:  # a part of the set: no completion marker
            self.tracker.finish("done")
            return StageResult(self.layout.dest, self.status)
        return self.finish({"kind": "shards", "digest": m.digest, "files": m.files})

    def _attempt(self, shard: Shard, got: Extracted) -> str | None:
        """Fetch and extract `shard` once; None if it matched its manifest entry, else why not."""
        counted, add = self.counter()
        try:
            checksum = self.manifest.checksum
            parts, reader = self.fetch(self.source.key(shard.name), shard.size, add, checksum)
            with parts:
                extract_shard(reader, self.layout.dest, shard.split, self.dirs, got)
            if parts.object_size is not None and parts.object_size != shard.size:
                problem: str | None = (
                    f"the object has {parts.object_size:,} bytes, the manifest says {shard.size:,}"
                )
            elif reader.count != shard.size:
                problem = f"{reader.count:,} bytes arrived of {shard.size:,}"
            elif reader.hexdigest() != shard.expected(checksum):
                problem = (
                    f"its {checksum} is {reader.hexdigest()[:16]}, the manifest says "
                    f"{shard.expected(checksum)[:16]}"
                )
            elif got.files != shard.files:
                problem = f"it holds {got.files:,} files, the manifest says {shard.files:,}"
            else:
                problem = None
        except (TransferError, ShardContentError) as exc:
            if self.cancelled.is_set():
                raise _Cancelled() from exc
            problem = str(exc)
        if problem is not None:
            self.tracker.undo(counted[0])
        return problem

    def _stage_shard(self, shard: Shard) -> None:
        written: list[str] = []
        try:
            self._stage_shard_checked(shard, written)
        except BaseException as exc:
            remove_files(self.layout.dest, written)  # nothing half-checked stays behind
            if isinstance(exc, OSError):
                raise DataError(
                    f"shard {shard.name} of {self.source.uri}: cannot write "
                    f"{exc.filename or 'its files'}: {exc.strerror or exc}"
                ) from exc
            raise

    def _stage_shard_checked(self, shard: Shard, written: list[str]) -> None:
        problem: str | None = None
        for attempt in (1, 2):
            if self.cancelled.is_set():
                return
            got = Extracted()
            try:
                problem = self._attempt(shard, got)
            finally:
                written += got.names
            if problem is None:
                kept = set(got.names)
                remove_files(self.layout.dest, [n for n in written if n not in kept])
                # the names let a loader read this shard before the rest arrive (stream_data)
                self.layout.mark_shard(
                    shard.name,
                    {
                        "sha256": shard.sha256,
                        "size": shard.size,
                        "files": got.files,
                        "names": got.names,
                    },
                )
                self.tracker.item_done(refetched=attempt > 1)
                written.clear()  # in place and marked: kept
                return
            if attempt == 1:
                self.log(f"shard {shard.name}: {problem}; fetching it again")
        raise DataError(
            f"shard {shard.name} of {self.source.uri} failed its check twice: {problem}",
            hint="the object in S3 does not match its manifest; push the data set again "
            "(spotrun data push)",
        )


class _FileStager(_Stager):
    """A folder tree without a manifest: every object under the prefix, into place."""

    kind: Literal["shards", "files"] = "files"
    _journal: TextIO

    def run(self) -> StageResult:
        objects = self._listing()
        self.layout.prepare(f"files:{self.source.uri}")
        already = self.layout.objects_done()
        todo = [o for o in objects if already.get(o.key) != (o.size, o.etag)]
        st = self.status
        st.total_bytes, st.items_total = sum(o.size for o in objects), len(objects)
        st.items_skipped = st.items_done = len(objects) - len(todo)
        st.skipped_bytes = st.done_bytes = st.total_bytes - sum(o.size for o in todo)
        need = sum(o.size + BLOCK_BYTES for o in todo)
        check_space(self.layout.dest, need, self.options.reserve_bytes, self.source.uri)
        self.log(
            f"staging {self.source.uri}: {len(objects):,} files, {fmt_bytes(st.total_bytes)} "
            f"into {self.layout.dest} (no manifest: file by file; `spotrun data push` makes "
            "shards, much faster for many small files)"
        )
        self._journal = open(self.layout.objects_journal, "a")
        try:
            self.run_all(list(todo), self._stage_object)  # type: ignore[arg-type]
        finally:
            self._journal.close()
        return self.finish({"kind": "files"})

    def _rel(self, info: ObjectInfo) -> PurePosixPath:
        return PurePosixPath(info.key[len(self.source.list_prefix) :])

    def _listing(self) -> list[ObjectInfo]:
        prefix = self.source.list_prefix
        objects = []
        for info in self.store.list(prefix):
            rel = info.key[len(prefix) :]
            parts = PurePosixPath(rel).parts
            if not rel or rel.endswith("/") or parts[0] == STATE_DIR:
                continue
            plain_relpath(rel, what=f"{self.store.where}/{info.key}: the key's file path")
            objects.append(info)
        if not objects:
            raise UsageError(
                f"{self.source.uri} holds no manifest.json and no files",
                hint=f"push a data set there: spotrun data push FOLDER {self.source.uri}",
            )
        tops = {PurePosixPath(o.key[len(prefix) :]).parts[0] for o in objects}
        if TRAIN_SPLIT not in tops or not tops.intersection(EVAL_SPLITS):
            raise UsageError(
                f"{self.source.uri} holds neither manifest.json nor an ImageFolder "
                f"(found {', '.join(sorted(tops)[:5])}/ at its top)",
                hint="expected PREFIX/manifest.json (spotrun data push) or PREFIX/train/ and "
                "PREFIX/val/ (or test/) of class folders",
            )
        return objects

    def _stage_object(self, info: ObjectInfo) -> None:
        rel = self._rel(info)
        target = safe_join(self.layout.dest, str(rel), what="the key's file path")
        try:
            self.dirs.ensure(target.parent)
        except OSError as exc:
            raise DataError(
                f"{self.store.where}/{info.key}: cannot make folder {target.parent}: "
                f"{exc.strerror or exc} (another key is a file of that name)"
            ) from exc
        tmp = part_path(target)
        md5 = info.etag if _MD5.fullmatch(info.etag) else None
        problem: str | None = None
        for attempt in (1, 2):
            if self.cancelled.is_set():
                return
            counted, add = self.counter()
            try:
                parts, reader = self.fetch(info.key, info.size, add, "md5" if md5 else None)
                with parts, open(tmp, "wb") as out:
                    while data := reader.read(COPY_BYTES):
                        out.write(data)
                if reader.count != info.size:
                    problem = f"{reader.count:,} bytes arrived of {info.size:,}"
                elif md5 is not None and reader.hexdigest() != md5:
                    problem = f"its MD5 {reader.hexdigest()} is not its ETag {md5}"
                else:
                    os.replace(tmp, target)
                    with self._lock:
                        self._journal.write(f"{info.key}\t{info.size}\t{info.etag}\n")
                        self._journal.flush()
                    self.tracker.item_done(refetched=attempt > 1)
                    return
            except TransferError as exc:
                if self.cancelled.is_set():
                    raise _Cancelled() from exc
                problem = str(exc)
            except OSError as exc:  # e.g. a key that is a file where another needs a folder
                tmp.unlink(missing_ok=True)
                raise DataError(
                    f"{self.store.where}/{info.key}: cannot write {target}: {exc.strerror or exc}"
                ) from exc
            self.tracker.undo(counted[0])
            if attempt == 1:
                self.log(f"{rel}: {problem}; fetching it again")
        tmp.unlink(missing_ok=True)
        raise DataError(f"{self.store.where}/{info.key} failed its check twice: {problem}")
