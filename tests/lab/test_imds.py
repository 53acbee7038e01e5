"""The lab's metadata service expires IMDSv2 tokens, and the agent's watcher gets a new one on
the 401 instead of missing a spot notice (EC2 User Guide, "Use the Instance Metadata Service
to access instance metadata": a GET with an expired token is answered 401 Unauthorized)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotlab.imds import Imds as LabImds
from spotlab.interruptions import notice_document
from spotlab.lab import free_port
from spotrun.agent.imds import Imds
from spotrun.agent.watcher import ACTION_PATH, WatchConfig, Watcher
from spotrun.core.rundir import NOTICE_FILE
from tests.helpers import wait_for


@pytest.fixture
def metadata() -> Iterator[LabImds]:
    service = LabImds(
        "127.0.0.1",
        free_port(),
        instance_id="i-0123456789abcdef0",
        instance_type="c6i.large",
        zone="us-east-1a",
        region="us-east-1",
        ami_id="ami-12345678",
    )
    yield service
    service.stop()


def _answers(url: str, token: str) -> int:
    request = urllib.request.Request(
        f"{url}/latest/meta-data/instance-id", headers={"X-aws-ec2-metadata-token": token}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_token_that_expires_is_renewed_on_the_401_and_the_notice_is_seen(
    metadata: LabImds, tmp_path: Path
) -> None:
    metadata.max_token_s = 1  # the agent asks for six hours; this token lives one second
    client = Imds(metadata.url)
    watcher = Watcher(WatchConfig(tmp_path, "imdsrun0001", metadata.url, terminate=False), client)
    assert watcher.step()  # a first round: the token fetched, no notice yet
    first_token = client._token
    assert first_token is not None
    wait_for(lambda: _answers(metadata.url, first_token) == 401, 30, "the token to expire")
    refused_before = metadata.refused

    metadata.announce(ACTION_PATH, notice_document("terminate", 2_000_000_000.0))
    watcher.step()

    notice = json.loads((tmp_path / NOTICE_FILE).read_text())
    assert notice["action"] == "terminate"
    assert notice["instance_id"] == "i-0123456789abcdef0"
    assert metadata.refused > refused_before  # the agent's old token was refused...
    assert client._token not in (None, first_token)  # ...and it asked for a new one

    metadata.expire_tokens()  # every token at once (the instance stopped and started)
    assert client.get("meta-data/instance-id") == "i-0123456789abcdef0"
