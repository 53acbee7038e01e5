"""File locks that say a process is alive and drives something (a run, a sweep, the home).

A holder keeps the lock open for its whole life; anyone can tell whether it lives by trying
the lock, without trusting a pid that may have been reused.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

from spotrun.core.waiting import poll_until


def try_lock(path: Path, wait_s: float = 0.0) -> IO[str] | None:
    """The lock held open (keep the handle), or None if another process holds it."""
    fh = open(path, "a")

    def locked() -> bool:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    if poll_until(locked, timeout_s=wait_s, interval_s=0.05):
        return fh
    fh.close()
    return None


def lock_is_held(lock_path: Path, holder_pid: int | None) -> bool:
    """True while a live process holds `lock_path` (holder_pid: the one the ledger names)."""
    if not lock_path.exists():
        return False
    fh = try_lock(lock_path)
    if fh is None and not process_running(holder_pid):
        # A killed process's main thread turns zombie before its other threads have let go
        # of its files, this lock among them: give them a moment rather than trust the lock.
        fh = try_lock(lock_path, wait_s=2.0)
    if fh is None:
        return True
    fh.close()  # we got it, so nobody holds it; closing releases it
    return False


def process_running(pid: int | None) -> bool:
    """pid is a process that is not a zombie (a zombie's main thread has exited)."""
    if pid is None:
        return False
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"
