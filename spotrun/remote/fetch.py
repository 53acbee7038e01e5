"""One file of a run folder brought home whole, never through a link, by any Runner.

The instance opens the listed path once and checks what it opened (spotrun.remote.listing's
OWN_FUNCTION): a plain file inside the run folder, reached through no link. A job that swaps a
listed file, or a folder on its path, for a link to /etc between the listing and the copy
gets nothing copied; a FIFO is never opened. The bytes come as the answer of a shell command,
BLOCK_BYTES at a time, each block from the same file (device, inode, size and times the same)
or the copy is dropped, to be tried again at the next pull.

Here the file is written under a short temporary name beside its place and renamed: a 255-byte
name (fine there) must not grow a suffix past this machine's limit. Whatever this machine
cannot write (a name or path too long here, a folder where the file goes, a full or read-only
disk) is a LocalFileError: the laptop's fault, never the instance's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from spotrun.core.errors import LocalFileError, RemoteError
from spotrun.remote.listing import OWN_FUNCTION, OWN_GONE, OWN_LINKED
from spotrun.remote.runner import Runner

BLOCK_BYTES = 32 << 20  # one command's answer: held in memory while it is written here
FETCH_TIMEOUT_S = 300.0  # for one block, over a slow link
_UNREADABLE = 6  # the instance could not open it (its permissions)
_READ_FAILED = 7  # the instance could not read it (its disk)

_WHY_HERE = {
    errno.ENAMETOOLONG: "its name or path is too long here",
    errno.ENOTDIR: "a file here has the name of one of its folders",
    errno.EEXIST: "a file here has the name of one of its folders",
    errno.EISDIR: "a folder here has its name",
    errno.ENOSPC: "this machine's disk is full",
    errno.EDQUOT: "this machine's disk quota is used up",
    errno.EROFS: "the run folder here is read-only",
    errno.EACCES: "this machine does not let spotrun write it",
    errno.EPERM: "this machine does not let spotrun write it",
}


@dataclass(frozen=True)
class Fetched:
    size: int | None  # bytes brought home; None: nothing was
    refused: str | None = None  # why the instance's file was not copied (a link...); None
    # with no size: it went (rotated) or changed while read, and the next pull tries again


def shown_path(path: str) -> str:
    """`path` for a message: quoted, one line, and cut short when it is long."""
    if len(path) <= 120:
        return repr(path)
    return f"{path[:60]!r}...{path[-40:]!r} ({len(path.encode())} bytes)"


def local_fault(path: str, exc: OSError) -> LocalFileError:
    """This machine's failure to write `path` (in the run folder), in words."""
    why = _WHY_HERE.get(exc.errno or 0) or exc.strerror or type(exc).__name__
    return LocalFileError(f"{shown_path(path)} cannot be written here: {why}")


def fetch_command(run_dir: str, path: str, offset: int, count: int) -> str:
    """Shell: `IDENTITY\\0` then up to `count` bytes of `path` (in `run_dir`) from `offset`.
    Exit 4: gone; 5: a link, moved or not a plain file; 6: cannot be opened; 7: read failed."""
    q = shlex.quote
    return (
        OWN_FUNCTION
        + f"[ -L {q(run_dir)} ] && exit {OWN_LINKED}; "
        + f"cd -P {q(run_dir)} 2>/dev/null || exit {OWN_GONE}; top=$(pwd -P) || exit {OWN_GONE}; "
        + f"f={q(path)}; "
        # a FIFO opened for reading would wait for a writer: only a plain file is opened
        + f'if [ -L "$f" ] || {{ [ -e "$f" ] && [ ! -f "$f" ]; }}; then exit {OWN_LINKED}; fi; '
        + f'[ -f "$f" ] || exit {OWN_GONE}; '
        + '{ _own "$f" || exit $?; '
        + f"s=$(stat -L -c %d:%i:%s:%Y:%Z /proc/self/fd/3) || exit {_READ_FAILED}; "
        + 'printf "%s\\0" "$s"; '
        + f"dd bs=1M iflag=skip_bytes,count_bytes skip={int(offset)} count={int(count)} "
        + f"status=none <&3 || exit {_READ_FAILED}; exit 0; "
        + f'}} 3< "$f"; exit {_UNREADABLE}'
    )


def fetch_file(runner: Runner, run_dir: str, path: str, target: Path) -> Fetched:
    """Bring `path` (in the instance's `run_dir`) to `target`. LocalFileError when this
    machine cannot write it; RemoteError when the instance cannot be asked."""
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        handle, tmp = tempfile.mkstemp(dir=parent, prefix=".", suffix=".part")
    except OSError as exc:
        raise local_fault(path, exc) from exc
    try:
        with os.fdopen(handle, "wb") as out:
            got = _copy_blocks(runner, run_dir, path, out)
        if got.size is not None:
            os.replace(tmp, target)
        return got
    except OSError as exc:
        raise local_fault(path, exc) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):  # renamed into place: nothing left
            os.unlink(tmp)


def _copy_blocks(runner: Runner, run_dir: str, path: str, out: BinaryIO) -> Fetched:
    offset = 0
    identity: bytes | None = None
    while True:
        answer = runner.run_bytes(
            fetch_command(run_dir, path, offset, BLOCK_BYTES), timeout_s=FETCH_TIMEOUT_S
        )
        said = " | ".join(answer.stderr.strip().splitlines()[-2:])
        if answer.exit_code == OWN_GONE:
            return Fetched(None)
        if answer.exit_code == OWN_LINKED:
            return Fetched(None, "on the instance it is a link, or not a plain file, now")
        if answer.exit_code == _UNREADABLE:
            return Fetched(None, f"the instance cannot open it: {said or 'refused'}")
        if answer.exit_code == _READ_FAILED:
            return Fetched(None, f"the instance cannot read it: {said or 'read failed'}")
        answer.check(f"copying {path} from {run_dir}")
        head, _, data = answer.stdout.partition(b"\0")
        fields = head.split(b":")
        if len(fields) != 5 or not fields[2].isdigit():
            raise RemoteError(f"the instance's answer about {path} is garbled")
        if identity is not None and head != identity:
            return Fetched(None)  # replaced or rewritten between blocks: next pull
        identity = head
        size = int(fields[2])
        if len(data) != max(0, min(BLOCK_BYTES, size - offset)):
            return Fetched(None)  # it shrank while read
        out.write(data)
        offset += len(data)
        if offset >= size:
            return Fetched(offset)
