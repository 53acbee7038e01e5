"""A local HTTP server that stands in for a data set's public home: it serves the files of one
folder on 127.0.0.1, answers `Range: bytes=N-` with 206 as real web servers do, and records
each request's path and Range header. The shared data folder (../shared/data) is what the
tests serve: the public files themselves, offline."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


def shared_data() -> Path:
    """../shared/data, or a skip saying why: the data files are never committed."""
    if not (SHARED_DATA / "tinyshakespeare.txt").is_file():
        pytest.skip(f"{SHARED_DATA} is absent: it holds the public data sets served offline")
    return SHARED_DATA


@dataclass
class DataServer:
    url: str
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range)


@contextmanager
def serve_folder(folder: Path) -> Iterator[DataServer]:
    record: list[tuple[str, str | None]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            wanted = self.headers.get("Range")
            record.append((self.path, wanted))
            path = folder / self.path.lstrip("/")
            if not path.is_file():
                self.send_error(404)
                return
            body = path.read_bytes()
            start = 0
            if wanted and wanted.startswith("bytes=") and wanted.endswith("-"):
                start = int(wanted[len("bytes=") : -1])
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            self.wfile.write(body[start:])

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            return  # quiet: the test asserts on `requests`

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield DataServer(f"http://127.0.0.1:{server.server_address[1]}", record)
    finally:
        server.shutdown()
        server.server_close()
