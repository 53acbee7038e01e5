"""A fresh S3 bucket on the process's shared moto server, with os.environ pointed at it.

Import `s3_bucket` into a test module or conftest to use it as a fixture.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from spotlab.lab import FAKE_CREDENTIALS, REGION, MotoServer


@pytest.fixture
def s3_bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Any]]:
    """(bucket name, a boto3 client straight to moto); os.environ points boto3 at moto."""
    server = MotoServer.shared()
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    client = server.client("s3")
    client.create_bucket(Bucket=bucket)
    yield bucket, client
