"""One object read in order while up to `window` ranged GETs of it run ahead in parallel.

A tar shard must be read front to back (it is extracted as it arrives), but one GET stream is
slow on S3 (tens of MB/s per connection). `OrderedParts` splits the object into ranges, keeps
`window` of them downloading at once, each into a small bounded queue, and hands the bytes to
its reader strictly in order. Memory stays bounded (window x queue depth x chunk), and with
window=1 and one range it is a plain streaming GET with no copy at all.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from spotrun.datasets.objects import TransferError

# Bytes a part may hold ahead of its reader (in the chunks the store yields, about 1 MiB).
QUEUE_CHUNKS = 8
# Attempts per part when a transfer breaks mid-way; each resumes at the byte it reached.
PART_ATTEMPTS = 3

Fetch = Callable[[int, int], tuple[int, Iterator[bytes]]]  # (start, end) -> (size, chunks)


@dataclass(frozen=True)
class Range:
    start: int
    end: int  # exclusive


def split_ranges(size: int, parts: int, min_part: int) -> list[Range]:
    """`size` bytes in at most `parts` ranges of at least `min_part` bytes (the last may be
    shorter); one empty range for an empty object."""
    if size <= 0:
        return [Range(0, 0)]
    count = max(1, min(parts, size // max(1, min_part)))
    step = -(-size // count)
    return [Range(s, min(size, s + step)) for s in range(0, size, step)]


_DONE = object()


class _Part:
    def __init__(self, span: Range) -> None:
        self.span = span
        self.chunks: queue.Queue[object] = queue.Queue(maxsize=QUEUE_CHUNKS)
        self.thread: threading.Thread | None = None


class OrderedParts:
    """A read-only, forward-only stream over `ranges` of one object, fetched ahead."""

    def __init__(
        self,
        fetch: Fetch,
        ranges: list[Range],
        window: int,
        cancelled: threading.Event,
    ) -> None:
        self.fetch = fetch
        self.ranges = ranges
        self.window = max(1, window)
        self.cancelled = cancelled
        self.object_size: int | None = None  # the size the store reported
        self._parts: list[_Part] = []
        self._next_to_start = 0
        self._current = 0
        self._chunk = b""  # the chunk being read, from self._pos on
        self._pos = 0
        self._closed = threading.Event()
        # One range: read in the reader's own thread, with no queue and no thread switch per
        # chunk (on a small machine the hand-over cost more than the GET itself).
        self._inline = len(ranges) == 1
        self._inline_at = ranges[0].start if ranges else 0
        self._inline_chunks: Iterator[bytes] | None = None
        self._inline_tries = 0
        if not self._inline:
            for _ in range(min(self.window, len(ranges))):
                self._start_next()

    # ------------------------------------------------------------ fetching
    def _start_next(self) -> None:
        part = _Part(self.ranges[self._next_to_start])
        self._next_to_start += 1
        part.thread = threading.Thread(target=self._download, args=(part,), daemon=True)
        self._parts.append(part)
        part.thread.start()

    def _put(self, part: _Part, item: object) -> bool:
        """Queue `item` for the reader; False once the stream is closed or cancelled."""
        while not (self._closed.is_set() or self.cancelled.is_set()):
            try:
                part.chunks.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _download(self, part: _Part) -> None:
        position, end = part.span.start, part.span.end
        failure: BaseException | None = None
        for _attempt in range(PART_ATTEMPTS):
            try:
                size, chunks = self.fetch(position, end)
                self.object_size = size
                for chunk in chunks:
                    if not self._put(part, chunk):
                        return
                    position += len(chunk)
                if position < end:
                    raise TransferError(f"the transfer ended at byte {position} of {end}")
                self._put(part, _DONE)
                return
            except TransferError as exc:
                failure = exc  # resume at `position` with a fresh ranged GET
            except BaseException as exc:  # handed to the reader, raised there
                self._put(part, exc)
                return
        self._put(part, failure)

    # ------------------------------------------------------------- reading
    def _next_inline(self) -> bytes | None:
        end = self.ranges[0].end
        while True:
            if self.cancelled.is_set() or self._closed.is_set():
                raise TransferError("cancelled")
            if self._inline_chunks is None and self._inline_tries and self._inline_at >= end:
                return None
            try:
                if self._inline_chunks is None:
                    self._inline_tries += 1
                    size, self._inline_chunks = self.fetch(self._inline_at, end)
                    self.object_size = size
                chunk = next(self._inline_chunks)
            except StopIteration:
                self._inline_chunks = None
                if self._inline_at >= end:
                    return None
                failure = TransferError(f"the transfer ended at byte {self._inline_at} of {end}")
            except TransferError as exc:
                self._inline_chunks = None
                failure = exc
            else:
                self._inline_at += len(chunk)
                return chunk
            if self._inline_tries >= PART_ATTEMPTS:  # resume at the byte reached, or give up
                raise failure

    def _next_chunk(self) -> bytes | None:
        if self._inline:
            return self._next_inline()
        while self._current < len(self._parts):
            part = self._parts[self._current]
            while True:
                if self.cancelled.is_set():
                    raise TransferError("cancelled")
                try:
                    item = part.chunks.get(timeout=0.2)
                    break
                except queue.Empty:
                    continue
            if item is _DONE:
                self._current += 1
                if self._next_to_start < len(self.ranges):
                    self._start_next()
                continue
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, bytes):
                return item
            assert isinstance(item, (bytearray, memoryview))
            return bytes(item)
        return None

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            pieces = [self._chunk[self._pos :]]
            self._chunk, self._pos = b"", 0
            while (chunk := self._next_chunk()) is not None:
                pieces.append(chunk)
            return b"".join(pieces)
        while self._pos >= len(self._chunk):
            chunk = self._next_chunk()
            if chunk is None:
                return b""
            self._chunk, self._pos = chunk, 0
        if self._pos == 0 and size >= len(self._chunk):  # the whole chunk: handed on, no copy
            self._pos = len(self._chunk)
            return self._chunk
        out = self._chunk[self._pos : self._pos + size]
        self._pos += len(out)
        return out

    def close(self) -> None:
        self._closed.set()
        close = getattr(self._inline_chunks, "close", None)
        if close is not None:  # a GET left part-read: its connection goes now, not at GC
            close()
        for part in self._parts:
            if part.thread is not None:
                part.thread.join(timeout=5)

    def __enter__(self) -> OrderedParts:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
