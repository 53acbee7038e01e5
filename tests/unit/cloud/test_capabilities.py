"""Which cloud declares which capability: callers ask isinstance, never probe by name."""

from __future__ import annotations

from pathlib import Path

from spotrun.cloud import get_provider
from spotrun.cloud.capabilities import AttachesDataVolumes, PacesPolls
from spotrun.core.config import load_settings


def test_aws_attaches_data_volumes_and_paces_its_polls_and_the_local_cloud_neither(
    tmp_path: Path,
) -> None:
    settings = load_settings(tmp_path)
    aws = get_provider("aws", settings)  # makes no AWS call until asked
    local = get_provider("local", settings)
    assert isinstance(aws, AttachesDataVolumes) and isinstance(aws, PacesPolls)
    assert aws.poll_s == settings.aws.poll_s
    assert not isinstance(local, AttachesDataVolumes) and not isinstance(local, PacesPolls)
