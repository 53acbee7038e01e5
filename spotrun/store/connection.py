"""The ledger's SQLite connection: opening it (WAL, at the current schema), one IMMEDIATE
transaction per write, waiting out a busy database, refusing a damaged one, and keeping the file
and SPOTRUN_HOME private to their user."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spotrun.core.errors import LedgerBusyError, LedgerError, LedgerWriteError
from spotrun.core.home import LEDGER_FILE, RUNS_FOLDER
from spotrun.core.rundir import HOME_VAR
from spotrun.store.schema import is_current, migrate

# A busy ledger (another process holds its write lock: a long CLI write, a backup, a user's
# sqlite3 shell) is transient. Each statement waits BUSY_WAIT_S inside SQLite, and is tried
# again until BUSY_BOUND_S have passed; only then is it a LedgerBusyError. No run is torn down
# for it (the controller retries its step).
BUSY_WAIT_S = 5.0
BUSY_BOUND_S = 600.0


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


# Faults of this machine that pass (a read-only mount or file, a full disk, a failing device):
# the ledger cannot be written now, and may be later. SQLite names them in sqlite_errorname.
_WRITE_FAULT_CODES = ("SQLITE_READONLY", "SQLITE_FULL", "SQLITE_IOERR")
_WRITE_FAULT_TEXTS = ("readonly database", "disk is full", "disk I/O error")
# The same faults met by a write of our own to a file
WRITE_FAULT_ERRNOS = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EIO})


def _is_write_fault(exc: sqlite3.DatabaseError) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(_WRITE_FAULT_CODES) or any(t in str(exc) for t in _WRITE_FAULT_TEXTS)


def _write_fault(where: str, exc: BaseException) -> LedgerWriteError:
    return LedgerWriteError(
        f"cannot write the ledger at {where} now ({exc})",
        hint="it is read-only, its disk is full or failing; runs wait until it can be written",
    )


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc)
    return "malformed" in text or "not a database" in text or "corrupt" in text


def _damaged(where: str, exc: sqlite3.DatabaseError | UnicodeDecodeError) -> LedgerError:
    why = exc if isinstance(exc, sqlite3.DatabaseError) else "SQLite's answer is not text"
    return LedgerError(
        f"{where} is not a readable spotrun ledger: it is damaged ({why})",
        hint=f"move it aside with its -wal and -shm (for f in {where}*; do mv $f $f.bad; "
        "done) and spotrun starts a new one, adopting the run folders under runs/ back; "
        f"`sqlite3 {where}.bad .recover` may save what it held",
    )


class BusyRetryConnection(sqlite3.Connection):
    """The ledger's connection: the one place that waits out a busy database.

    A statement outside a transaction (autocommit, BEGIN) or a COMMIT that meets a lock held by
    another process is tried again, with a bound; a statement inside an open transaction is
    not (this connection holds the write lock there, and a retry could not be correct)."""

    bound_s: float = BUSY_BOUND_S
    where: str = "the ledger"  # its path, for messages
    # Set once a write met a read-only, full or failing ledger: a connection opened while the
    # file was read-only stays read-only for life, so its owner opens a new one (LedgerDatabase).
    stale: bool = False

    def _retrying(self, sql: str, call: Callable[[], sqlite3.Cursor]) -> sqlite3.Cursor:
        retriable = not self.in_transaction or sql.lstrip().upper().startswith("COMMIT")
        deadline = time.monotonic() + self.bound_s
        while True:
            try:
                return call()
            except sqlite3.OperationalError as exc:
                if _is_damage(exc):
                    raise _damaged(self.where, exc) from exc
                if _is_write_fault(exc):
                    self.stale = True
                    raise _write_fault(self.where, exc) from exc
                if not (retriable and _is_busy(exc)):
                    raise
                if time.monotonic() >= deadline:
                    raise LedgerBusyError(
                        f"the ledger stayed locked by another process for over "
                        f"{self.bound_s:.0f} s ({exc})",
                        hint="find the process holding it (fuser ledger.db) and let it finish",
                    ) from exc
            except sqlite3.DatabaseError as exc:
                if _is_damage(exc):
                    raise _damaged(self.where, exc) from exc
                if _is_write_fault(exc):
                    self.stale = True
                    raise _write_fault(self.where, exc) from exc
                raise
            except UnicodeDecodeError as exc:
                # SQLite read a damaged page (a WAL frame trusted through a live process's
                # -shm) and said so in bytes that are not text
                raise _damaged(self.where, exc) from exc

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self._retrying(
            sql, lambda: super(BusyRetryConnection, self).execute(sql, parameters)
        )

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        rows = list(parameters)  # an iterator could not be read twice
        return self._retrying(sql, lambda: super(BusyRetryConnection, self).executemany(sql, rows))


def keep_private(db_path: Path) -> None:
    """The ledger holds what runs were given (a resume needs its --env values): 0600, with its
    -wal and -shm, made so before SQLite writes a byte (an older ledger is tightened here)."""
    try:
        # Never open (and close) an existing ledger file here: closing any descriptor of it
        # drops every POSIX lock this process holds on it, those of its other connections too.
        if not db_path.exists():
            with contextlib.suppress(FileExistsError):
                os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        for path in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
            if path.exists() and path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
    except OSError as exc:
        raise LedgerError(
            f"cannot make the ledger at {db_path} private: {exc.strerror or exc}",
            hint=f"fix its permissions or set {HOME_VAR} to a folder you own",
        ) from exc


def ensure_writable_home(home: Path) -> None:
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        if home.stat().st_uid == os.getuid() and home.stat().st_mode & 0o077:
            os.chmod(home, 0o700)  # run folders, logs and the ledger: the user's alone
        (home / RUNS_FOLDER).mkdir(exist_ok=True)
    except OSError as exc:
        raise LedgerError(
            f"cannot create {HOME_VAR} at {home}: {exc.strerror or exc}",
            hint=f"set {HOME_VAR} to a folder you can write",
        ) from exc
    # A real write, not os.access: root passes os.access on a read-only mount.
    try:
        probe = home / f".write-probe-{os.getpid()}-{os.urandom(4).hex()}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as exc:
        error = LedgerWriteError if exc.errno in WRITE_FAULT_ERRNOS else LedgerError
        raise error(
            f"{HOME_VAR} at {home} is not writable: {exc.strerror or exc}",
            hint=f"fix its permissions or set {HOME_VAR} to a folder you can write",
        ) from exc


def home_write_fault(home: Path) -> str | None:
    """Why the ledger or SPOTRUN_HOME cannot be written now (read-only, full, failing), or
    None. Call it before this process opens the ledger: closing a descriptor of the file would
    drop the SQLite locks of its connections. A byte, not an empty file: a full disk still
    makes empty files."""
    ledger = home / LEDGER_FILE
    try:
        if ledger.exists():
            os.close(os.open(ledger, os.O_RDWR))
    except OSError as exc:
        return f"the ledger at {ledger} cannot be written now ({exc.strerror or exc})"
    for folder in (home, home / RUNS_FOLDER):  # the run folders may be a disk of their own
        if not folder.is_dir():
            continue
        probe = folder / f".write-probe-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, b"\n")
            finally:
                os.close(fd)
                os.unlink(probe)
        except OSError as exc:
            return f"{folder} cannot be written now ({exc.strerror or exc})"
    return None


class LedgerDatabase:
    """The ledger's file, opened: its connection and its write transactions. The Ledger's table
    groups (spotrun.store.runs, instances, events, costs) are built on it and share it."""

    def __init__(self, home: Path, clock: Callable[[], float]) -> None:
        self.home = home
        self.clock = clock  # stamps every time the ledger records (a fixed one for imports, tests)
        self.path = home / LEDGER_FILE
        ensure_writable_home(home)
        keep_private(self.path)
        self._conn = self._connect()

    def _connect(self) -> BusyRetryConnection:
        try:
            db = sqlite3.connect(
                self.path,
                timeout=BUSY_WAIT_S,
                isolation_level=None,
                factory=BusyRetryConnection,
            )
            db.row_factory = sqlite3.Row
            db.where = str(self.path)
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_WAIT_S * 1000)}")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA foreign_keys = ON")
            if not is_current(db):  # a migration's write lock only when one is due
                with _transaction(db) as tx:
                    migrate(tx, self.path)
            keep_private(self.path)  # the -wal and -shm SQLite just made
        except LedgerError:
            raise
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc) or "unable to open" in str(exc):
                raise LedgerError(
                    f"cannot write the ledger at {self.path} ({exc})",
                    hint=f"fix its permissions or set {HOME_VAR} to a folder you can write",
                ) from exc
            raise LedgerError(f"cannot use the ledger at {self.path} ({exc})") from exc
        except sqlite3.DatabaseError as exc:
            raise LedgerError(
                f"{self.path} is not a readable spotrun ledger ({exc})",
                hint=f"move it aside (mv {self.path} {self.path}.bad) and spotrun starts a new one",
            ) from exc
        return db

    @property
    def _db(self) -> BusyRetryConnection:
        return self._conn

    # The sweep and price tables' own accessors (spotrun.store.sweeps, price_cache) share this
    # connection and its transactions.
    @property
    def db(self) -> sqlite3.Connection:
        return self._db

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: readers go on, other writers wait for it. After a write
        that found the ledger read-only, full or failing, on a new connection: one opened while
        the file was read-only never writes again, and the ledger must be written once it can."""
        if self._conn.stale and not self._conn.in_transaction:
            self._conn.close()
            self._conn = self._connect()
        with _transaction(self._conn) as db:
            yield db

    def close(self) -> None:
        self._conn.close()


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        # A COMMIT that failed (full disk, lock held past the bound) leaves it open; SQLite
        # itself ends one that an I/O error or a full disk broke: nothing left to roll back.
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
