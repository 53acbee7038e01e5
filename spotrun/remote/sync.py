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
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spotrun.core.errors import RemoteError
from spotrun.core.rundir import SYNC_STATE_FILE, WORKDIR_DIR
from spotrun.core.safe_paths import safe_join
from spotrun.remote.job import JobStatus
from spotrun.remote.listing import SKIPPED_FOLDERS, RemoteFile, grows, kept
from spotrun.remote.probe import Probe, Tail, run_probe
from spotrun.remote.runner import Runner

SyncState = dict[str, list[float]]  # path in the run folder -> [size, mtime] when pulled
OnFile = Callable[[str, int], None]  # (path in the run folder, its bytes), as each one arrives


@dataclass(frozen=True)
class SyncResult:
    fetched: list[str]
    appended_bytes: int
    whole_bytes: int
    unchanged: int


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
    local_dir.mkdir(parents=True, exist_ok=True)
    state = _load_state(local_dir)
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
        runner, listing, remote_dir, local_dir, state, offsets, answer.tails, on_file=on_file
    )
    return Polled(answer.status, synced)


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


def _load_state(local_dir: Path) -> SyncState:
    try:
        data = json.loads((local_dir / SYNC_STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_state(local_dir: Path, state: SyncState) -> None:
    path = local_dir / SYNC_STATE_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, sort_keys=True))
    os.replace(tmp, path)


def _pull_listed(
    runner: Runner,
    listing: list[RemoteFile],
    remote_dir: str,
    local_dir: Path,
    state: SyncState,
    offsets: dict[str, int],
    tails: dict[str, bytes],
    *,
    on_file: OnFile | None,
) -> SyncResult:
    """Bring the listed files (paths in the run folder) that are new or changed. `tails`: the
    bytes of growing files from `offsets`, where their local copies ended."""
    fetched: list[str] = []
    appended = whole = unchanged = 0
    changed = False
    # Growing files last: a reader who finds a new metrics line then finds the files written
    # before it (a resumed job's recipe.json, with its new epoch count) already home.
    for item in sorted(listing, key=lambda listed: grows(listed.path)):
        key = item.path
        target = safe_join(local_dir, key, what="file listed by the instance")
        try:
            have = os.stat(target).st_size
        except (FileNotFoundError, NotADirectoryError):
            have = -1
        if grows(key) and 0 < have <= item.size and offsets.get(key) == have:
            # A growing file's local copy is its record: as long as the listing, it is whole;
            # else what the poll read follows (none: it shrank while read, being replaced,
            # and the next poll lists it shorter and fetches it whole).
            if have == item.size:
                unchanged += 1
                continue
            data = tails.get(key, b"")
            with open(target, "ab") as fh:
                fh.write(data)
            appended += len(data)
        elif state.get(key) == [item.size, item.mtime] and have == item.size:
            unchanged += 1
            continue
        else:
            remote_path = f"{remote_dir}/{key}"
            try:
                runner.get(remote_path, target)
            except RemoteError:
                # The trainer replaced it (checkpoints rotate) between the listing and the
                # copy: the next pull brings its successor. Anything else is an error.
                if runner.run(f"test -e {shlex.quote(remote_path)}", timeout_s=30).ok:
                    raise
                continue
            whole += item.size
            state[key] = [item.size, item.mtime]
            changed = True
        fetched.append(key)
        if on_file is not None:
            on_file(key, item.size)
    if changed:  # appends change nothing there: the local copy's length is their record
        _save_state(local_dir, state)
    return SyncResult(fetched, appended, whole, unchanged)
