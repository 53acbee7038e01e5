"""The one check for names that come from outside data and become paths on this machine.

An S3 key's remainder, a manifest's split, a tar member, an instance's file listing: each
names a file under a destination folder that spotrun chose. Such a name is accepted only as a
plain relative POSIX path (no leading '/', no empty, '.' or '..' part, no NUL), so that the
join cannot leave the destination; anything else is refused with UnsafePathError, never
cleaned up into something that might still mean another place.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from spotrun.core.errors import UnsafePathError

_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def plain_relpath(name: str, *, what: str) -> str:
    """`name` if it is a plain relative path, else UnsafePathError naming `what` it was."""
    if not name or "\0" in name or name.startswith("/"):
        raise UnsafePathError(f"{what} {name!r} is not a plain relative path")
    if any(part in ("", ".", "..") for part in name.split("/")):
        raise UnsafePathError(
            f"{what} {name!r} is not a plain relative path (an empty, '.' or '..' part)"
        )
    return name


def safe_join(dest: Path, name: str, *, what: str) -> Path:
    """`dest / name`, refused (UnsafePathError) unless it stays inside `dest`."""
    return dest / plain_relpath(name, what=what)


# A temporary name keeps its file's name up to this many bytes; a longer one (a bucket key's
# file may have 255, the most a file system takes) is hashed, so the temporary name fits too.
_READABLE_NAME_BYTES = 100


def part_path(target: Path) -> Path:
    """Where `target` is written before it is renamed into place: a hidden `.NAME.part` beside
    it, or `.HASH.part` for a long name (`.NAME.part` of a 252-byte name does not fit)."""
    name = target.name
    if len(os.fsencode(name)) > _READABLE_NAME_BYTES:
        name = hashlib.sha256(os.fsencode(name)).hexdigest()[:32]
    return target.with_name(f".{name}.part")


def plain_folder_name(name: str, *, what: str) -> str:
    """`name` if it is one visible folder name of letters, digits, '.', '_' and '-' that starts
    with a letter or digit (so never a hidden folder such as spotrun's own state folder)."""
    if not _FOLDER_NAME.fullmatch(name):
        raise UnsafePathError(
            f"{what} {name!r} is not a plain folder name",
            hint="letters, digits, '.', '_' and '-', starting with a letter or digit",
        )
    return name
