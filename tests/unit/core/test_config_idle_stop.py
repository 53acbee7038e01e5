"""aws.controller_idle_stop_s: 30 minutes by default, 0 = never, a near miss named."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotrun.core.config import load_settings
from spotrun.core.errors import UsageError


def test_the_idle_stop_key_defaults_to_half_an_hour_and_a_typo_is_named(tmp_path: Path) -> None:
    assert load_settings(tmp_path).aws.controller_idle_stop_s == 1800.0
    (tmp_path / "config.toml").write_text("[aws]\ncontroller_idle_stop_s = 0\n")
    assert load_settings(tmp_path).aws.controller_idle_stop_s == 0.0
    (tmp_path / "config.toml").write_text("[aws]\ncontroller_idle_stop = 90\n")
    with pytest.raises(UsageError) as caught:
        load_settings(tmp_path)
    assert "did you mean controller_idle_stop_s" in caught.value.user_message()
    (tmp_path / "config.toml").write_text("[aws]\ncontroller_idle_stop_s = -1\n")
    with pytest.raises(UsageError):
        load_settings(tmp_path)
