"""A run folder's files as the instance lists them, and which of them sync brings home.

`find -printf '%P\\0%s\\0%T@\\0'` lists a folder: NUL-separated, since a file name may hold any
byte but NUL (a tab or newline in a name must not drop or split it). Dot files, lock and
partial files, the controller's own log and the job's copy of its workdir stay out (the
workdir's declared outputs come back on their own). `find` lists what is there without
following links; what is later read is checked once opened (OWN_FUNCTION), since the job may
swap a listed file for a link between the listing and the read.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from spotrun.core.errors import RemoteError
from spotrun.core.rundir import SUPERVISOR_LOG_FILE, WORKDIR_DIR, is_event_file
from spotrun.remote.runner import Runner

APPEND_ONLY_SUFFIXES = (".log", ".jsonl")
SKIPPED_SUFFIXES = (".tmp", ".part", ".lock", ".pid")
SKIPPED_NAMES = frozenset({SUPERVISOR_LOG_FILE})
# The job's copy of its workdir: only its declared outputs come back.
SKIPPED_FOLDERS = (WORKDIR_DIR + "/",)
# find's fields for each file: its path under the starting point, size, mtime.
FIND_FIELDS = "-printf '%P\\0%s\\0%T@\\0'"

# `_own PATH`, with $top the run folder's physical path and PATH open as fd 3: whether what was
# opened is that very file, a plain file reached through no link (0), gone since (4), or a
# link, a moved or special file (5). The kernel's name for the open file (/proc/self/fd/3) is
# what counts, not the name listed: a folder on the path swapped for a link shows there.
# The x keeps a name's trailing newlines from $( ); one newline is readlink's own.
OWN_LINKED = 5
OWN_GONE = 4
OWN_FUNCTION = (
    "nl='\n'; _own() { p=$(readlink /proc/self/fd/3 && printf x) || return 5; "
    'p=${p%x}; p=${p%"$nl"}; '
    '[ "$p" = "$top/$1" ] && [ -f /proc/self/fd/3 ] && return 0; '
    '[ "$p" = "$top/$1 (deleted)" ] && return 4; return 5; }; '
)


@dataclass(frozen=True)
class RemoteFile:
    path: str  # relative to the run folder
    size: int
    mtime: float


def grows(path: str) -> bool:
    """Files that only ever grow (job.log, metrics.jsonl, TensorBoard's event files): their
    new bytes are fetched from where the local copy ends."""
    return path.endswith(APPEND_ONLY_SUFFIXES) or is_event_file(path)


def kept(files: list[RemoteFile], skip_folders: tuple[str, ...]) -> list[RemoteFile]:
    """The listed files sync brings home."""
    out = []
    for item in files:
        name = os.path.basename(item.path)
        # Dot files are the instance's own bookkeeping (e.g. the uploader's state).
        if name.startswith(".") or name in SKIPPED_NAMES or name.endswith(SKIPPED_SUFFIXES):
            continue
        if skip_folders and item.path.startswith(skip_folders):
            continue
        out.append(item)
    return out


def output_files(files: list[RemoteFile]) -> list[RemoteFile]:
    """Listed outputs (find started at ./PATH, each path so prefixed), relative to the
    workdir; partial files stay out."""
    return [
        RemoteFile(item.path[2:], item.size, item.mtime)
        for item in files
        if item.path.startswith("./") and not os.path.basename(item.path).endswith(SKIPPED_SUFFIXES)
    ]


def remote_file(path: str, size: str, mtime: str) -> RemoteFile:
    try:
        return RemoteFile(path, int(size), float(mtime))
    except ValueError:
        raise RemoteError(f"the instance's file listing is garbled near {path!r}") from None


def list_remote(
    runner: Runner, remote_dir: str, *, skip_folders: tuple[str, ...] = SKIPPED_FOLDERS
) -> list[RemoteFile] | None:
    """The run folder's files, or None when the folder does not exist (yet)."""
    command = f"cd {shlex.quote(remote_dir)} 2>/dev/null || exit 3; find . -type f {FIND_FIELDS}"
    result = runner.run(command, timeout_s=120)
    if result.exit_code == 3:
        return None
    result.check(f"listing {remote_dir}")
    fields = result.stdout.split("\0")
    listed = [remote_file(*fields[i : i + 3]) for i in range(0, len(fields) - 2, 3)]
    return kept(listed, skip_folders)
