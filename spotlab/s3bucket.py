"""A fresh S3 bucket on the process's shared moto server, with os.environ pointed at it
through an IAM-enforcing front (spotlab/iam.py), as the lab does.

Import `s3_bucket` into a test module or conftest to use it as a fixture. The data set tests
push (the user's side) and stage or fetch (the instance role's side) in one process, with one
identity: it holds the README's user policy and its instance policy, both for this bucket as
BUCKET and DATA-BUCKET, so an S3 call that neither policy allows fails the test.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from spotlab.front import AwsFront
from spotlab.iam import Identity
from spotlab.lab import ACCOUNT, FAKE_CREDENTIALS, REGION, USER, MotoServer
from spotrun.cloud.aws.policy import instance_policy, user_policy


@pytest.fixture
def s3_bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Any]]:
    """(bucket name, a boto3 client straight to moto); os.environ points boto3 at the front."""
    server = MotoServer.shared()
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    client = server.client("s3")
    client.create_bucket(Bucket=bucket)
    front = AwsFront(server.host, server.port, lambda: None)
    policies = (user_policy(bucket, bucket), instance_policy(bucket, bucket))
    front.iam.add(
        FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        Identity(f"arn:aws:iam::{ACCOUNT}:user/{USER}", policies),
    )

    def exists(name: str) -> bool:  # S3 answers NoSuchBucket before IAM for a missing one
        try:
            client.head_bucket(Bucket=name)
        except ClientError:
            return False
        return True

    front.iam.bucket_exists = exists
    front.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", front.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    try:
        yield bucket, client
    finally:
        front.stop()
    # a call neither README policy allows: a missing permission, or one spotrun should not make
    assert front.iam.denied == [], front.iam.denied
