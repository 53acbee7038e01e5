"""Staging progress: counted by the threads that move bytes, written as staging.json, told as
one line ("staging 37.0 GB / 148.0 GB, 1.20 GB/s, 2 min left").

staging.json lives in the run folder: the controller reads it over the runner while the run
is bootstrapping and turns it into events and the run's staging record (time and bytes, for
the cost report).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

RATE_WINDOW_S = 10.0  # the rate (and time left) is taken over the last this many seconds

State = Literal["checking", "staging", "done", "failed"]


def fmt_bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_rate(bytes_per_s: float) -> str:
    return fmt_bytes(bytes_per_s) + "/s"


def fmt_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass
class StagingStatus:
    """One staging of one data set onto one machine, as staging.json holds it."""

    source: str
    dest: str
    kind: Literal["shards", "files", "snapshot"] = "shards"
    state: State = "checking"
    total_bytes: int = 0  # what the data set is (shard or object bytes)
    done_bytes: int = 0  # in place, skipped ones included
    skipped_bytes: int = 0  # already in place from an earlier attempt
    fetched_bytes: int = 0  # moved over the network this time, re-fetches included
    items_total: int = 0  # shards or objects
    items_done: int = 0
    items_skipped: int = 0
    refetched: int = 0
    started_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    rate_bps: float = 0.0
    eta_s: float | None = None
    error: str | None = None
    pid: int = field(default_factory=os.getpid)

    @property
    def seconds(self) -> float:
        return (self.ended_at or self.updated_at) - self.started_at

    def line(self) -> str:
        """One line for the log and the run's events."""
        if self.state == "failed":
            return f"staging {self.source} failed: {self.error}"
        if self.state == "done":
            average = self.fetched_bytes / self.seconds if self.seconds > 0 else 0.0
            extra = []
            if self.items_skipped:
                extra.append(f"{self.items_skipped} already in place")
            if self.refetched:
                extra.append(f"{self.refetched} fetched again after a bad checksum")
            tail = f"; {', '.join(extra)}" if extra else ""
            return (
                f"staged {self.source}: {fmt_bytes(self.total_bytes)} in {self.seconds:.1f} s "
                f"({fmt_rate(average)}) to {self.dest}{tail}"
            )
        if self.state == "checking":
            return f"staging {self.source}: checking what is already in {self.dest}"
        left = "" if self.eta_s is None else f", {fmt_seconds(self.eta_s)} left"
        return (
            f"staging {fmt_bytes(self.done_bytes)} / {fmt_bytes(self.total_bytes)}, "
            f"{fmt_rate(self.rate_bps)}{left}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StagingStatus:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def write_status(path: Path, status: StagingStatus) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(status.to_dict()))
    os.replace(tmp, path)


def read_status(text: str) -> StagingStatus | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return StagingStatus.from_dict(data) if isinstance(data, dict) else None


class Tracker:
    """Thread-safe counters over a StagingStatus, written out every `every_s` seconds, with a
    log line every `log_every_s`."""

    def __init__(
        self,
        status: StagingStatus,
        path: Path | None,
        log: Callable[[str], None],
        *,
        every_s: float = 1.0,
        log_every_s: float = 10.0,
    ) -> None:
        self.status = status
        self.path = path
        self.log = log
        self.every_s = every_s
        self.log_every_s = log_every_s
        self._lock = threading.Lock()
        self._samples: deque[tuple[float, int]] = deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_log = 0.0

    def add(self, fetched: int) -> None:
        with self._lock:
            self.status.fetched_bytes += fetched
            self.status.done_bytes += fetched

    def undo(self, counted: int) -> None:
        """Bytes of an attempt that failed: they are not in place after all."""
        with self._lock:
            self.status.done_bytes -= counted

    def item_done(self, refetched: bool) -> None:
        with self._lock:
            self.status.items_done += 1
            self.status.refetched += int(refetched)

    def _refresh(self, now: float) -> None:
        s = self.status
        self._samples.append((now, s.fetched_bytes))
        while len(self._samples) > 2 and now - self._samples[0][0] > RATE_WINDOW_S:
            self._samples.popleft()
        t0, b0 = self._samples[0]
        s.rate_bps = (s.fetched_bytes - b0) / (now - t0) if now > t0 else 0.0
        left = s.total_bytes - s.done_bytes
        s.eta_s = left / s.rate_bps if s.rate_bps > 0 else None
        s.updated_at = now

    def flush(self, *, force_log: bool = False) -> None:
        with self._lock:
            now = time.time()
            self._refresh(now)
            if self.path is not None:
                write_status(self.path, self.status)
            if force_log or now - self._last_log >= self.log_every_s:
                self._last_log = now
                self.log(self.status.line())

    def start(self) -> None:
        self.status.state = "staging"
        self.flush(force_log=True)
        self._thread = threading.Thread(target=self._run, name="staging-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.flush()

    def finish(self, state: State, error: str | None = None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.status.state = state
        self.status.error = error
        self.status.ended_at = time.time()
        self.flush(force_log=True)
