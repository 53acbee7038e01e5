"""Pull a run's folder from its instance, incrementally: only new or changed files move.

One remote `find` lists the folder (path, size, mtime); what was pulled before is remembered in
`.sync.json` inside the local run folder, so a supervisor that restarts carries on where the last
one stopped. Files that only grow (job.log, metrics.jsonl, TensorBoard's event files) are
fetched from where the local copy ends; every other changed file is fetched whole into a
temporary name and renamed, so readers never see half a checkpoint. Files deleted on the
instance are kept here: after a spot interruption a fresh instance starts empty, and that must
never erase what was already saved.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from spotrun.core.errors import RemoteError
from spotrun.core.rundir import SUPERVISOR_LOG_FILE, SYNC_STATE_FILE, WORKDIR_DIR, is_event_file
from spotrun.core.safe_paths import safe_join
from spotrun.remote.runner import Runner

APPEND_ONLY_SUFFIXES = (".log", ".jsonl")
SKIPPED_SUFFIXES = (".tmp", ".part", ".lock", ".pid")
SKIPPED_NAMES = frozenset({SUPERVISOR_LOG_FILE})
# The job's copy of its workdir: only its declared outputs come back (pull_paths).
SKIPPED_FOLDERS = (WORKDIR_DIR + "/",)


@runtime_checkable
class RangeReader(Protocol):
    def read_from(self, remote: str, offset: int) -> bytes: ...


@dataclass(frozen=True)
class RemoteFile:
    path: str  # relative to the run folder
    size: int
    mtime: float


@dataclass(frozen=True)
class SyncResult:
    fetched: list[str]
    appended_bytes: int
    whole_bytes: int
    unchanged: int


def list_remote(
    runner: Runner, remote_dir: str, *, skip_folders: tuple[str, ...] = SKIPPED_FOLDERS
) -> list[RemoteFile] | None:
    """The run folder's files, or None when the folder does not exist (yet)."""
    command = (
        f"cd {shlex.quote(remote_dir)} 2>/dev/null || exit 3; "
        "find . -type f -printf '%P\\0%s\\0%T@\\0'"
    )
    result = runner.run(command, timeout_s=120)
    if result.exit_code == 3:
        return None
    result.check(f"listing {remote_dir}")
    files = []
    for item in _parse_listing(result.stdout):
        name = os.path.basename(item.path)
        # Dot files are the instance's own bookkeeping (e.g. the uploader's state).
        if name.startswith(".") or name in SKIPPED_NAMES or name.endswith(SKIPPED_SUFFIXES):
            continue
        if skip_folders and item.path.startswith(skip_folders):
            continue
        files.append(item)
    return files


def _parse_listing(stdout: str) -> list[RemoteFile]:
    """`find -printf '%P\\0%s\\0%T@\\0'` output: NUL-separated, since a file name may hold
    any byte but NUL (a tab or newline in a name must not drop or split it)."""
    fields = stdout.split("\0")
    files = []
    for i in range(0, len(fields) - 2, 3):
        path, size, mtime = fields[i : i + 3]
        try:
            files.append(RemoteFile(path, int(size), float(mtime)))
        except ValueError:
            raise RemoteError(f"the instance's file listing is garbled near {path!r}") from None
    return files


def list_remote_paths(runner: Runner, base: str, paths: list[str]) -> list[RemoteFile]:
    """The files at `paths` (files or folders, relative to `base`); missing ones are skipped."""
    if not paths:
        return []
    command = (
        f"cd {shlex.quote(base)} 2>/dev/null || exit 0; "
        # ./ first: a path that starts with '-' must not read as an option of find
        f"find {' '.join(shlex.quote('./' + p) for p in paths)} -type f "
        "-printf '%p\\0%s\\0%T@\\0' 2>/dev/null; exit 0"
    )
    result = runner.run(command, timeout_s=120).check(f"listing outputs in {base}")
    return [
        RemoteFile(item.path[2:], item.size, item.mtime)
        for item in _parse_listing(result.stdout)
        if item.path.startswith("./") and not os.path.basename(item.path).endswith(SKIPPED_SUFFIXES)
    ]


def _load_state(local_dir: Path) -> dict[str, list[float]]:
    try:
        data = json.loads((local_dir / SYNC_STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_state(local_dir: Path, state: dict[str, list[float]]) -> None:
    path = local_dir / SYNC_STATE_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, sort_keys=True))
    os.replace(tmp, path)


OnFile = Callable[[str, int], None]  # (path in the run folder, its bytes), as each one arrives


def pull_run_dir(
    runner: Runner,
    remote_dir: str,
    local_dir: Path,
    *,
    final: bool,
    on_file: OnFile | None = None,
    skip_folders: tuple[str, ...] = SKIPPED_FOLDERS,
) -> SyncResult:
    """Bring `remote_dir` into `local_dir`; `final` is the last pull before the instance ends.
    `skip_folders`: the job's workdir copy by default (its outputs come through pull_paths)."""
    local_dir.mkdir(parents=True, exist_ok=True)
    listing = list_remote(runner, remote_dir, skip_folders=skip_folders)
    if listing is None:
        if final:
            raise RemoteError(f"the run folder {remote_dir} is missing on the instance")
        return SyncResult([], 0, 0, 0)
    return _pull_listed(runner, listing, remote_dir, local_dir, local_dir, on_file=on_file)


def pull_paths(
    runner: Runner, remote_base: str, paths: list[str], local_dir: Path, subdir: str
) -> SyncResult:
    """Bring `paths` (relative to `remote_base` on the instance) into `local_dir/subdir`,
    incrementally, with the run folder's own sync state (e.g. a job's outputs)."""
    local_dir.mkdir(parents=True, exist_ok=True)
    listing = list_remote_paths(runner, remote_base, paths)
    return _pull_listed(runner, listing, remote_base, local_dir / subdir, local_dir, f"{subdir}/")


def _pull_listed(
    runner: Runner,
    listing: list[RemoteFile],
    remote_base: str,
    target_dir: Path,
    state_dir: Path,
    key_prefix: str = "",
    *,
    on_file: OnFile | None = None,
) -> SyncResult:
    state = _load_state(state_dir)
    fetched: list[str] = []
    appended = whole = unchanged = 0
    for item in listing:
        target = safe_join(target_dir, item.path, what="file listed by the instance")
        key = key_prefix + item.path
        have = target.stat().st_size if target.exists() else -1
        before = state.get(key)
        if before is not None and before == [item.size, item.mtime] and have == item.size:
            unchanged += 1
            continue
        remote_path = f"{remote_base}/{item.path}"
        grows = item.path.endswith(APPEND_ONLY_SUFFIXES) or is_event_file(item.path)
        if grows and 0 < have <= item.size and isinstance(runner, RangeReader):
            data = runner.read_from(remote_path, have)
            with open(target, "ab") as fh:
                fh.write(data)
            appended += len(data)
            state[key] = [have + len(data), item.mtime]
        else:
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
        fetched.append(key)
        if on_file is not None:
            on_file(key, item.size)
    if fetched:
        _save_state(state_dir, state)
    return SyncResult(fetched, appended, whole, unchanged)
