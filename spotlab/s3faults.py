"""S3's own faults, injected by the lab's front for chosen operations: `SlowDown` (HTTP 503,
S3's throttling when a prefix gets more requests than it scales to at once) and
`InternalError` (HTTP 500), as S3 sends them (its error XML), N times each.

Modelled on the S3 User Guide, "Best practices design patterns: optimizing Amazon S3
performance" (docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html: 503
Slow Down while S3 scales) and the S3 API Reference's "Error responses" (SlowDown 503,
InternalError 500). moto never sends either; the front answers them itself, so every spotrun
process (the instances' uploaders included) meets them and its botocore retries them.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape

S3_ERRORS = {
    "SlowDown": (503, "Please reduce your request rate."),
    "InternalError": (500, "We encountered an internal error. Please try again."),
    "ServiceUnavailable": (503, "Service is unable to handle request."),
}


def s3_operation(method: str, path: str, copy_source: bool = False) -> str:
    """The S3 API operation of a path-style request (/bucket/key?query)."""
    parts = urlsplit(path)
    query = parse_qs(parts.query, keep_blank_values=True)
    has_key = "/" in parts.path.lstrip("/")
    if method == "PUT":
        if "partNumber" in query and "uploadId" in query:
            return "UploadPart"
        if not has_key:
            return "CreateBucket"
        return "CopyObject" if copy_source else "PutObject"
    if method == "POST":
        if "uploads" in query:
            return "CreateMultipartUpload"
        if "uploadId" in query:
            return "CompleteMultipartUpload"
        return "DeleteObjects" if "delete" in query else "PostObject"
    if method == "GET":
        if has_key:
            return "GetObject"
        return "ListObjectsV2" if query.get("list-type") == ["2"] else "ListObjects"
    if method == "HEAD":
        return "HeadObject" if has_key else "HeadBucket"
    if method == "DELETE":
        if "uploadId" in query:
            return "AbortMultipartUpload"
        return "DeleteObject" if has_key else "DeleteBucket"
    return method


@dataclass
class S3Fault:
    operation: str
    code: str
    times: int
    hits: int = 0

    def render(self) -> tuple[int, bytes]:
        status, message = S3_ERRORS[self.code]
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{escape(self.code)}</Code><Message>{escape(message)}</Message>"
            f"<RequestId>{uuid.uuid4().hex[:16].upper()}</RequestId></Error>"
        )
        return status, body.encode()


class S3Faults:
    """The faults a test asked for, taken in order by the calls they match."""

    def __init__(self) -> None:
        self._faults: list[S3Fault] = []
        self._lock = threading.Lock()

    def add(self, operation: str, code: str = "SlowDown", *, times: int = 1) -> S3Fault:
        if code not in S3_ERRORS:
            raise ValueError(f"the lab injects {', '.join(S3_ERRORS)}, not {code}")
        fault = S3Fault(operation, code, times)
        with self._lock:
            self._faults.append(fault)
        return fault

    def take(self, operation: str) -> S3Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.operation == operation and fault.times > 0:
                    fault.times -= 1
                    fault.hits += 1
                    return fault
        return None
