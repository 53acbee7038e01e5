"""Reading one object in order from moto's S3: in one GET (read in the reader's thread) or in
ranged GETs fetched ahead; a transfer that breaks off resumes at the byte it reached, and one
that keeps breaking fails after three tries."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from spotrun.cloud.aws.datasets import S3Store
from spotrun.datasets.objects import TransferError
from spotrun.datasets.parts import OrderedParts, split_ranges

DATA = os.urandom(3_000_000 + 123)


def _read_all(parts: OrderedParts, step: int) -> bytes:
    out = []
    while piece := parts.read(step):
        out.append(piece)
    return b"".join(out)


def _breaking(store: S3Store, breaks: list[int]) -> Any:
    """store.stream whose next transfers break off after these many bytes (a dropped link)."""
    starts: list[int] = []

    def fetch(start: int, end: int) -> tuple[int, Iterator[bytes]]:
        starts.append(start)
        size, chunks = store.stream("blob", start, end)
        if not breaks:
            return size, chunks
        limit = breaks.pop(0)

        def cut() -> Iterator[bytes]:
            sent = 0
            for chunk in chunks:
                if sent + len(chunk) > limit:
                    yield chunk[: limit - sent]
                    raise TransferError("the connection was reset")
                sent += len(chunk)
                yield chunk

        return size, cut()

    fetch.starts = starts  # type: ignore[attr-defined]
    return fetch


@pytest.mark.parametrize("window", [1, 4])
def test_in_order_and_resumed_after_a_break(s3_bucket: tuple[str, Any], window: int) -> None:
    bucket, client = s3_bucket
    client.put_object(Bucket=bucket, Key="blob", Body=DATA)
    store = S3Store(bucket)
    ranges = split_ranges(len(DATA), window, 500_000)
    fetch = _breaking(store, [1_234_567])
    with OrderedParts(fetch, ranges, window, threading.Event()) as parts:
        got = _read_all(parts, 65_536)
        assert parts.object_size == len(DATA)
    assert got == DATA
    if window == 1:  # one GET, resumed at the byte the broken one reached
        assert fetch.starts == [0, 1_234_567]


def test_a_transfer_that_keeps_breaking_fails(s3_bucket: tuple[str, Any]) -> None:
    bucket, client = s3_bucket
    client.put_object(Bucket=bucket, Key="blob", Body=DATA)
    fetch = _breaking(S3Store(bucket), [1000, 1000, 1000])
    parts = OrderedParts(fetch, split_ranges(len(DATA), 1, 1 << 30), 1, threading.Event())
    with parts, pytest.raises(TransferError, match="reset"):
        _read_all(parts, 1 << 20)
    assert fetch.starts == [0, 1000, 2000]


def test_an_empty_object_reports_its_size(s3_bucket: tuple[str, Any]) -> None:
    bucket, client = s3_bucket
    client.put_object(Bucket=bucket, Key="blob", Body=b"")
    store = S3Store(bucket)
    with OrderedParts(
        lambda s, e: store.stream("blob", s, e), split_ranges(0, 4, 1), 4, threading.Event()
    ) as parts:
        assert parts.read(100) == b"" and parts.object_size == 0
