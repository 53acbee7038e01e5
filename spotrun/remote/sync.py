"""Pull a run's folder from its instance, incrementally: only new or changed files move.

One command on the instance (spotrun.remote.probe) lists the folder (path, size, mtime) and
brings the new bytes of the files that only grow (job.log, metrics.jsonl, TensorBoard's event
files) from where the local copy ends, with the job's status when the controller polls. Every
other new or changed file is fetched whole into a temporary name and renamed, so readers never
see half a checkpoint. What was pulled whole is remembered in `.sync.json` inside the local
run folder, so a supervisor that restarts carries on where the last one stopped (a growing
file's record is its local copy's length: appending rewrites no state). Files deleted
on the instance are kept here: after a spot interruption a fresh instance starts empty, and
that must never erase what was already saved.

What this machine cannot write (a name or path too long here, a folder where a file goes, a
full disk) is skipped, not failed: the run goes on, and the file is remembered in `.sync.json`
with why (`not_home`), reported once (SyncResult.unsaved) and listed when the run ends. A file
is fetched only as the plain file it was listed as (spotrun.remote.fetch): never a folder,
never through a link.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from spotrun.core.errors import LocalFileError, RemoteError
from spotrun.core.rundir import SYNC_STATE_FILE, WORKDIR_DIR
from spotrun.core.safe_paths import safe_join
from spotrun.remote.fetch import fetch_file, local_fault, shown_path
from spotrun.remote.job import JobStatus
from spotrun.remote.listing import SKIPPED_FOLDERS, RemoteFile, grows, kept
from spotrun.remote.probe import Probe, Tail, run_probe
from spotrun.remote.runner import Runner

log = logging.getLogger(__name__)

SyncState = dict[str, list[float]]  # path in the run folder -> [size, mtime] when pulled
OnFile = Callable[[str, int], None]  # (path in the run folder, its bytes), as each one arrives
# In .sync.json beside the paths: those that could not come home, and why (empty once one
# did). No listed path starts with '/', so this key is no file's.
_UNSAVED_KEY = "/not-home"


@dataclass(frozen=True)
class SyncResult:
    fetched: list[str]
    appended_bytes: int
    whole_bytes: int
    unchanged: int
    # (path, why) for files that could not come home, each reported once per run folder
    unsaved: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Polled:
    status: JobStatus | None  # the job's, when its session was asked about
    synced: SyncResult


NOTHING = SyncResult([], 0, 0, 0)


def pull_run_dir(
    runner: Runner,
    remote_dir: str,
    local_dir: Path,
    *,
    final: bool,
    outputs: list[str] | None = None,
    on_file: OnFile | None = None,
    skip_folders: tuple[str, ...] = SKIPPED_FOLDERS,
) -> SyncResult:
    """Bring `remote_dir` into `local_dir`; `final` is the last pull before the instance ends.
    `skip_folders`: the job's workdir copy by default; `outputs` (paths in the workdir): the
    job's declared outputs, brought to `local_dir/workdir/`."""
    return poll_run_dir(
        runner,
        remote_dir,
        local_dir,
        session=None,
        final=final,
        outputs=outputs,
        on_file=on_file,
        skip_folders=skip_folders,
    ).synced


def poll_run_dir(
    runner: Runner,
    remote_dir: str,
    local_dir: Path,
    *,
    session: str | None,
    final: bool = False,
    outputs: list[str] | None = None,
    on_file: OnFile | None = None,
    skip_folders: tuple[str, ...] = SKIPPED_FOLDERS,
) -> Polled:
    """pull_run_dir, and the status of the job in tmux `session` asked in the same command."""
    try:
        local_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise local_fault(str(local_dir), exc) from exc
    state, unsaved = _load_state(local_dir)
    wanted = tuple(outputs or ())
    tails = tuple(_known_tails(local_dir, state, skip_folders, wanted))
    answer = run_probe(runner, Probe(remote_dir, session, wanted, tails))
    if answer.files is None:
        if final:
            raise RemoteError(f"the run folder {remote_dir} is missing on the instance")
        return Polled(answer.status, NOTHING)
    listing = kept(answer.files, skip_folders) + [
        RemoteFile(f"{WORKDIR_DIR}/{item.path}", item.size, item.mtime) for item in answer.outputs
    ]
    offsets = {tail.path: tail.offset for tail in tails}
    synced = _pull_listed(
        runner,
        listing,
        remote_dir,
        local_dir,
        _Memory(state, unsaved),
        offsets,
        answer.tails,
        on_file=on_file,
    )
    return Polled(answer.status, synced)


def not_home(local_dir: Path) -> dict[str, str]:
    """The files of the run folder that could not come home here, and why."""
    return {path: why for path, why in _load_state(local_dir)[1].items() if why}


def _known_tails(
    local_dir: Path, state: SyncState, skip_folders: tuple[str, ...], outputs: tuple[str, ...]
) -> list[Tail]:
    """The growing files already here: the probe brings their new bytes."""
    tails = []
    for path in state:
        if not grows(path):
            continue
        if skip_folders and path.startswith(skip_folders) and not _is_output(path, outputs):
            continue
        try:
            size = (local_dir / path).stat().st_size
        except OSError:
            continue
        if size > 0:
            tails.append(Tail(path, size))
    return tails


def _is_output(path: str, outputs: tuple[str, ...]) -> bool:
    inside = path.removeprefix(WORKDIR_DIR + "/")
    return inside != path and any(inside == o or inside.startswith(o + "/") for o in outputs)


def _load_state(local_dir: Path) -> tuple[SyncState, dict[str, str]]:
    """What was pulled, and what could not be ({} each when there is no readable record: the
    next pull fetches again)."""
    try:
        data = json.loads((local_dir / SYNC_STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}, {}
    if not isinstance(data, dict):
        return {}, {}
    unsaved = data.pop(_UNSAVED_KEY, None)
    if not isinstance(unsaved, dict):
        unsaved = {}
    return data, {str(k): str(v) for k, v in unsaved.items()}


@dataclass
class _Memory:
    """The sync record: what was pulled, and what could not come home."""

    pulled: SyncState
    unsaved: dict[str, str]
    changed: bool = False

    def could_not(self, path: str, why: str) -> bool:
        """Remember it; whether it is news (never reported for this run folder before)."""
        news = path not in self.unsaved
        if self.unsaved.get(path) != why:
            self.unsaved[path] = why
            self.changed = True
        return news

    def came_home(self, path: str) -> None:
        if self.unsaved.get(path):
            self.unsaved[path] = ""  # reported once already: never again
            self.changed = True

    def save(self, local_dir: Path) -> None:
        if not self.changed:  # appends change nothing: the local copy's length is their record
            return
        record: dict[str, object] = dict(self.pulled)
        if self.unsaved:
            record[_UNSAVED_KEY] = self.unsaved
        path = local_dir / SYNC_STATE_FILE
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(record, sort_keys=True))
            os.replace(tmp, path)
        except OSError as exc:  # the files came; without the record the next pull refetches
            log.warning("cannot record the sync in %s: %s", path, exc)


def _pull_listed(
    runner: Runner,
    listing: list[RemoteFile],
    remote_dir: str,
    local_dir: Path,
    memory: _Memory,
    offsets: dict[str, int],
    tails: dict[str, bytes],
    *,
    on_file: OnFile | None,
) -> SyncResult:
    """Bring the listed files (paths in the run folder) that are new or changed. `tails`: the
    bytes of growing files from `offsets`, where their local copies ended."""
    fetched: list[str] = []
    unsaved: list[tuple[str, str]] = []
    appended = whole = unchanged = 0
    # Growing files last: a reader who finds a new metrics line then finds the files written
    # before it (a resumed job's recipe.json, with its new epoch count) already home.
    for item in sorted(listing, key=lambda listed: grows(listed.path)):
        key = item.path
        target = safe_join(local_dir, key, what="file listed by the instance")
        try:
            moved = _pull_one(runner, item, remote_dir, target, memory, offsets, tails)
        except LocalFileError as exc:  # this machine's fault: skipped, the run goes on
            moved = exc.message
        if moved is None:
            unchanged += 1
            continue
        if isinstance(moved, str):
            if memory.could_not(key, moved):
                unsaved.append((key, moved))
            continue
        got, was_whole = moved
        if was_whole:
            whole += got
        else:
            appended += got
        memory.came_home(key)
        fetched.append(key)
        if on_file is not None:
            on_file(key, item.size)
    memory.save(local_dir)
    return SyncResult(fetched, appended, whole, unchanged, unsaved)


def _pull_one(
    runner: Runner,
    item: RemoteFile,
    remote_dir: str,
    target: Path,
    memory: _Memory,
    offsets: dict[str, int],
    tails: dict[str, bytes],
) -> tuple[int, bool] | str | None:
    """Bring one listed file: (bytes, whether whole) when it moved, None when it had not
    changed (or went meanwhile), or why the instance's file was refused."""
    key = item.path
    have = _local_size(key, target)
    if grows(key) and 0 < have <= item.size and offsets.get(key) == have:
        # A growing file's local copy is its record: as long as the listing, it is whole;
        # else what the poll read follows (none: it shrank while read, being replaced,
        # and the next poll lists it shorter and fetches it whole).
        if have == item.size:
            return None
        data = tails.get(key, b"")
        try:
            with open(target, "ab") as fh:
                fh.write(data)
        except OSError as exc:
            raise local_fault(key, exc) from exc
        return len(data), False
    if memory.pulled.get(key) == [item.size, item.mtime] and have == item.size:
        return None
    got = fetch_file(runner, remote_dir, key, target)
    if got.refused is not None:  # the instance's file was not the plain file listed
        return f"{shown_path(key)} was not copied: {got.refused}"
    if got.size is None:  # the trainer replaced it (checkpoints rotate): the next pull
        return None
    memory.pulled[key] = [item.size, item.mtime]
    memory.changed = True
    return got.size, True


def _local_size(key: str, target: Path) -> int:
    """The local copy's size; -1 when there is none (yet)."""
    try:
        found = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        return -1  # a file where a folder of its path should be: fetch_file says so
    except OSError as exc:  # a path too long here, say
        raise local_fault(key, exc) from exc
    if stat.S_ISDIR(found.st_mode):
        raise local_fault(key, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)))
    return found.st_size
