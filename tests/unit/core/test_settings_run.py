"""The [run] settings (how runs are driven, on every cloud) and their older spelling under
[aws]: a config file written before they moved is still honoured, key by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotrun.core.config import load_settings
from spotrun.core.errors import UsageError
from spotrun.core.settings_run import MOVED_FROM_AWS

# A config file as users wrote it before [run] existed (spotlab's config still does).
OLD_CONFIG = """\
[aws]
region = "eu-west-1"
ssh_timeout_s = 45.0
unreachable_s = 7.0
notice_poll_s = 0.5
end_grace_s = 30.0
no_progress_s = 0
reclaim_margin_s = 9.0
gpu_mismatch = "warn"
max_nodes = 3
rendezvous_port = 29999
cluster_env = { GLOO_SOCKET_IFNAME = "lo" }
cluster_replace_s = 12.0
root_volume_gb = 40
"""


def _home(tmp_path: Path, config: str) -> Path:
    (tmp_path / "config.toml").write_text(config)
    return tmp_path


def test_an_old_config_file_sets_the_run_settings(tmp_path: Path) -> None:
    settings = load_settings(_home(tmp_path, OLD_CONFIG))
    run = settings.run
    assert (run.ssh_timeout_s, run.unreachable_s, run.notice_poll_s) == (45.0, 7.0, 0.5)
    assert (run.end_grace_s, run.no_progress_s, run.reclaim_margin_s) == (30.0, 0.0, 9.0)
    assert (run.gpu_mismatch, run.max_nodes, run.rendezvous_port) == ("warn", 3, 29999)
    assert run.cluster_env == {"GLOO_SOCKET_IFNAME": "lo"}
    assert (run.cluster_replace_s, run.root_volume_gb) == (12.0, 40)
    assert settings.aws.region == "eu-west-1"  # what stays AWS's is read where it was
    assert set(MOVED_FROM_AWS) <= set(OLD_CONFIG.split())  # every moved key is tried above


def test_the_new_spelling_is_read_and_both_at_once_refused(tmp_path: Path) -> None:
    settings = load_settings(_home(tmp_path, "[run]\nunreachable_s = 8.0\n"))
    assert settings.run.unreachable_s == 8.0
    both = "[aws]\nunreachable_s = 7.0\n[run]\nunreachable_s = 8.0\n"
    with pytest.raises(UsageError) as caught:
        load_settings(_home(tmp_path, both))
    assert "aws.unreachable_s and run.unreachable_s both set" in caught.value.message
    assert "config.toml" in caught.value.message


def test_a_bad_old_key_is_named_as_the_user_wrote_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        load_settings(_home(tmp_path, "[aws]\nmax_nodes = 0\n"))
    assert "aws.max_nodes (now run.max_nodes)" in caught.value.message
